#pragma once
// Faults for the tests of a distributed job's failures (docs/distributed.md, "Failures"):
// with MANTISSA_TEST_FAULT="ACTION:RANK:POINT:N" in the environment, rank RANK hangs (ACTION
// "hang": sleeps forever, as a deadlocked rank would) or dies (ACTION "kill": SIGKILL, as the
// out-of-memory killer would) the N-th time it passes POINT (counted from 1). Points:
// "backward" (before every backward under ddp, zero1 and zero2) and "sharded_save" (after the
// rank wrote its files of a sharded checkpoint, before the ranks agree that every rank has).
// Without the variable nothing happens; a malformed value is an error naming the format.
namespace mantissa::train::detail {

void fault_point(const char* point, int rank);

}  // namespace mantissa::train::detail
