/**
 * The soak's one clock. Times are compared across processes: CLOCK_MONOTONIC (process.hrtime) is
 * one clock for every process of the machine, while performance.timeOrigin is each process's own
 * estimate of the wall clock at its start, which a preemption can put milliseconds off.
 */
export const now = (): number => Number(process.hrtime.bigint()) / 1e6;
