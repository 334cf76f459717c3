/**
 * The balancing window (MongoDB's `activeWindow`): migrations start only between `start` and
 * `stop`, 24-hour `HH:MM` times in the config server's local time zone. A window whose stop is
 * before its start wraps midnight (22:00–06:00 is the night); start equal to stop is the whole
 * day. No window: any time.
 */
export function isInsideActiveWindow(window: { start: string; stop: string } | null, now: Date): boolean {
  if (window === null) return true;
  const start = minutesOf(window.start);
  const stop = minutesOf(window.stop);
  const t = now.getHours() * 60 + now.getMinutes();
  if (start === stop) return true;
  if (start < stop) return t >= start && t < stop;
  return t >= start || t < stop;
}

function minutesOf(time: string): number {
  const [hours, minutes] = time.split(':').map(Number);
  return hours! * 60 + minutes!;
}
