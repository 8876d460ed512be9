"""Output retention that follows registered consumers."""

from operators.capture import Messages, Progress
from service.app.outputs import OutputLog


def log_with_times(retention: int = 100) -> OutputLog:
    log = OutputLog("out", 0, 1, retention)
    pusher = log.pusher()
    for t in range(4):
        pusher.push(Messages(t, [f"r{t}"]))
    pusher.push(Progress([(0, -1), (4, 1)]))  # times 0..3 are complete
    return log


def test_without_consumers_completed_times_stay_within_the_bound() -> None:
    log = log_with_times()
    assert log.complete_times(None, None) == [0, 1, 2, 3]
    assert log.evicted == []


def test_times_every_consumer_has_read_past_are_forgotten() -> None:
    log = log_with_times()
    log.commit("a", 2)
    assert log.complete_times(None, None) == [2, 3]
    assert log.is_forgotten(1) and not log.is_forgotten(2)
    log.commit("b", None)  # a second reader that has read nothing holds everything else
    log.commit("a", 4)
    assert log.complete_times(None, None) == [2, 3]
    log.commit("b", 3)
    assert log.complete_times(None, None) == [3]
    assert log.forget_consumer("b") and not log.forget_consumer("b")
    log.commit("a", 4)
    assert log.complete_times(None, None) == []


def test_a_commit_never_moves_a_consumer_backwards() -> None:
    log = log_with_times()
    log.commit("a", 3)
    log.commit("a", 1)
    assert log.consumers == {"a": 3}
    assert log.complete_times(None, None) == [3]


def test_the_hard_bound_still_applies_with_consumers() -> None:
    log = log_with_times(retention=2)
    assert log.complete_times(None, None) == [2, 3]
    log.commit("a", None)
    assert log.complete_times(None, None) == [2, 3]
