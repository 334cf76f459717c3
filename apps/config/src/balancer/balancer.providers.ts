import { BalancerCatalogStore } from './balancer-catalog.store.js';
import { BalancerCollectionService } from './balancer-collection.service.js';
import { BalancerMover } from './balancer-mover.service.js';
import { BalancerRecorder } from './balancer-recorder.service.js';
import { BalancerRoundService } from './balancer-round.service.js';
import { BalancerSecondaryService } from './balancer-secondary.service.js';
import { BalancerSplitter } from './balancer-splitter.service.js';
import { BalancerThrottleService } from './balancer-throttle.service.js';
import { BalancerService } from './balancer.service.js';
import { ClusterStatisticsService } from './cluster-statistics.service.js';
import { DefragmentationStore } from './defragmentation.store.js';
import { ForegroundLoadStore } from './foreground-load.store.js';

/** The balancer's providers, for the config module. */
export const BALANCER_PROVIDERS = [
  BalancerCatalogStore,
  ClusterStatisticsService,
  DefragmentationStore,
  ForegroundLoadStore,
  BalancerThrottleService,
  BalancerMover,
  BalancerRecorder,
  BalancerSecondaryService,
  BalancerSplitter,
  BalancerRoundService,
  BalancerCollectionService,
  BalancerService,
];
