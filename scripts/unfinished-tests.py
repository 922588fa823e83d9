"""Names the tests a Swift Testing run started and never ended, from its event stream
(`swift test --event-stream-output-path FILE --event-stream-version 0`).

    python3 scripts/unfinished-tests.py EVENTS.jsonl

scripts/test.sh calls it when a run outlives its watchdog, so a hang fails CI in minutes with the names of the tests
that hung, instead of at CI's time limit with nothing to go on.
"""
import json
import sys


def main(path):
    started = {}  # test id -> start time (seconds since 1970)
    cases = {}  # test id -> number of its cases running
    last = None
    with open(path, encoding="utf-8", errors="replace") as events:
        for line in events:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by the kill
            if record.get("kind") != "event":
                continue
            event = record["payload"]
            kind, test = event.get("kind"), event.get("testID")
            last = event.get("instant", {}).get("since1970", last)
            if kind == "testStarted":
                started[test] = event["instant"]["since1970"]
            elif kind == "testEnded":
                started.pop(test, None)
                cases.pop(test, None)
            elif kind == "testCaseStarted":
                cases[test] = cases.get(test, 0) + 1
            elif kind == "testCaseEnded":
                cases[test] = cases.get(test, 0) - 1
    # A suite is "started" while any of its tests run; name the tests (ids with a "/"), and a suite only if none of
    # its tests is open.
    open_tests = sorted(started.items(), key=lambda item: item[1])
    leaves = [test for test, _ in open_tests if not any(other != test and other.startswith(test + "/") for other in started)]
    if not leaves:
        print("  (none: every test that started also ended; the hang is outside a test)")
    for test in leaves:
        running = cases.get(test, 0)
        extra = f", {running} of its cases still running" if running > 0 else ""
        age = f"{last - started[test]:.0f} s before the last event" if last else ""
        print(f"  {test}  (started {age}{extra})")


if __name__ == "__main__":
    main(sys.argv[1])
