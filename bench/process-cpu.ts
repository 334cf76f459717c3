import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

/** Linux's USER_HZ: the unit of the times in /proc/<pid>/stat (100 on every mainstream build). */
const TICKS_PER_SECOND = 100;

/** User plus system CPU time of a process in ms, from /proc; undefined when it cannot be read. */
function cpuMillis(pid: number): number | undefined {
  try {
    // The command name (field 2) may hold spaces: the fields after it follow the last ')'.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

function parentOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return undefined;
  }
}

/** The postmaster of a Postgres data directory and its children (backends, writers), as they are now. */
function postgresPids(dataDir: string): number[] {
  let postmaster: number;
  try {
    postmaster = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    return [];
  }
  const children = readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .filter((pid) => parentOf(pid) === postmaster);
  return [postmaster, ...children];
}

/**
 * CPU time the whole machine has spent busy, all cores and every process and kernel thread
 * together (user, nice, system, irq, softirq and steal from /proc/stat), in ms; undefined
 * where /proc/stat cannot be read.
 */
export function machineBusyMillis(): number | undefined {
  try {
    const [, user, nice, system, , , irq, softirq, steal] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).map(Number);
    return (((user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0) + (steal ?? 0)) * 1000) / TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

export interface CpuGroups {
  /** Group name → pids, read again at each snapshot (Postgres backends come and go). */
  [group: string]: () => number[];
}

/**
 * CPU time spent by groups of processes between two snapshots, from /proc (Linux only; elsewhere
 * every figure is undefined). A process that exits between the snapshots takes its time with it,
 * so a pool's short-lived connection is missed; long-lived pools are what the benches use.
 */
export class ProcessCpu {
  constructor(private readonly groups: CpuGroups) {}

  static postgres(dataDir: string): () => number[] {
    return () => postgresPids(dataDir);
  }

  /** Per-pid CPU ms now, per group. */
  snapshot(): Map<string, Map<number, number>> {
    const snapshot = new Map<string, Map<number, number>>();
    for (const [group, pids] of Object.entries(this.groups)) {
      const times = new Map<number, number>();
      for (const pid of pids()) {
        const ms = cpuMillis(pid);
        if (ms !== undefined) times.set(pid, ms);
      }
      snapshot.set(group, times);
    }
    return snapshot;
  }

  /** CPU ms per group since `before`; a process born since counts from zero. Undefined for a group no pid of which could be read. */
  since(before: Map<string, Map<number, number>>): Map<string, number | undefined> {
    const now = this.snapshot();
    const spent = new Map<string, number | undefined>();
    for (const [group, times] of now) {
      if (times.size === 0) {
        spent.set(group, undefined);
        continue;
      }
      const earlier = before.get(group) ?? new Map<number, number>();
      let total = 0;
      for (const [pid, ms] of times) total += ms - (earlier.get(pid) ?? 0);
      spent.set(group, total);
    }
    return spent;
  }
}
