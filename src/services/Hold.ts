/**
 * A hold just taken: `sentAt` (performance.now()) is no later than when Redis granted it, and
 * `expiresAt`, when set, is when Redis may expire it at the earliest if that is sooner than
 * `sentAt` plus the lease asked for (a fair lock's handed-over grant).
 */
export interface Hold {
  sentAt: number;
  expiresAt?: number;
}
