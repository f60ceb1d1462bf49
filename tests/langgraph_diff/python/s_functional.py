"""The functional API: @entrypoint and @task. Parallel tasks, an interrupt and a resume that reuses the
finished tasks, `previous`, `entrypoint.final`, streamed returns."""

import time

from langgraph.func import entrypoint, task
from langgraph.types import Command, interrupt

from common import Rec, js, saver, scenario, thread


class NodeFailure(Exception):
    """A failure raised by the scenario's own task."""


def counter():
    return {"runs": 0}


def times_ten(runs):
    @task
    def times_ten(x: int) -> int:
        runs["runs"] += 1
        # Later inputs finish first: results still come back in call order.
        time.sleep(0.02 * (4 - x))
        return x * 10
    return times_ten


def paused_state(rec, app, cfg):
    """What get_state shows of a functional thread: values, next, tasks and interrupts."""
    s = app.get_state(cfg)
    rec.note(op="state", values=js(s.values), next=list(s.next),
             tasks=[{"id": t.id, "name": t.name, "interrupts": js(t.interrupts)} for t in s.tasks],
             interrupts=js(s.interrupts))


@scenario
def functional_parallel_tasks_stream_their_returns(rec: Rec):
    runs = counter()
    ten = times_ten(runs)

    @entrypoint(checkpointer=saver())
    def fan(numbers: list) -> list:
        futures = [ten(n) for n in numbers]
        return [f.result() for f in futures]

    cfg = thread()
    rec.stream(fan, [1, 2, 3], cfg, ["updates", "values"])
    rec.note(op="runs", n=runs["runs"])
    paused_state(rec, fan, cfg)
    rec.invoke(fan, [3], cfg)


@scenario
def functional_resume_reuses_finished_tasks(rec: Rec):
    runs = counter()
    ten = times_ten(runs)

    @entrypoint(checkpointer=saver())
    def review(numbers: list) -> dict:
        futures = [ten(n) for n in numbers]
        results = [f.result() for f in futures]
        verdict = interrupt({"results": results})
        return {"results": results, "verdict": verdict}

    cfg = thread()
    rec.stream(review, [1, 2], cfg, ["updates", "values"])
    rec.note(op="runs", n=runs["runs"])
    paused_state(rec, review, cfg)
    rec.stream(review, Command(resume="approved"), cfg, ["updates", "values"])
    rec.note(op="runs", n=runs["runs"])
    paused_state(rec, review, cfg)
    # A new run on the thread pauses while the last return value is still the thread's value.
    rec.invoke(review, [3], cfg)
    rec.note(op="runs", n=runs["runs"])
    rec.invoke(review, Command(resume="rejected"), cfg)


@scenario
def functional_interrupt_with_a_bare_value_hides_it(rec: Rec):
    @entrypoint(checkpointer=saver())
    def add(n: int, *, previous=None) -> int:
        interrupt("go?")
        return n + (previous or 0)

    cfg = thread()
    rec.invoke(add, 1, cfg)
    rec.invoke(add, Command(resume=True), cfg)
    rec.invoke(add, 2, cfg)
    rec.stream(add, Command(resume=True), cfg, ["values", "updates"])


@scenario
def functional_previous_and_final(rec: Rec):
    @entrypoint(checkpointer=saver())
    def accumulate(n: int, *, previous=None) -> entrypoint.final[int, int]:
        total = (previous or 0) + n
        return entrypoint.final(value=previous, save=total)

    cfg = thread()
    for n in (3, 4, 5):
        rec.invoke(accumulate, n, cfg)
    rec.invoke(accumulate, 1, thread("other"))
    paused_state(rec, accumulate, cfg)


@scenario
def functional_task_error_fails_the_run_and_resume_reruns_it(rec: Rec):
    runs = counter()
    ten = times_ten(runs)
    tries = {"n": 0}

    @task
    def flaky(x: int) -> int:
        tries["n"] += 1
        if tries["n"] == 1:
            raise NodeFailure("first try fails")
        return x + 1

    @entrypoint(checkpointer=saver())
    def flow(x: int) -> int:
        return flaky(ten(x).result()).result()

    cfg = thread()
    rec.invoke(flow, 1, cfg)
    rec.invoke(flow, None, cfg)
    rec.note(op="runs", n=runs["runs"], tries=tries["n"])


@scenario
def functional_history_and_saved_checkpoints(rec: Rec):
    runs = counter()
    ten = times_ten(runs)

    @entrypoint(checkpointer=saver())
    def review(n: int) -> dict:
        result = ten(n).result()
        verdict = interrupt(result)
        return {"result": result, "verdict": verdict}

    cfg = thread()
    rec.invoke(review, 1, cfg)
    rec.state(review, cfg)
    rec.saved(review, cfg)
    rec.invoke(review, Command(resume="ok"), cfg)
    rec.history(review, cfg)
    rec.saved(review, cfg)


@scenario
def functional_interrupt_inside_a_task(rec: Rec):
    runs = counter()

    @task
    def step_1(query: str) -> str:
        runs["runs"] += 1
        return f"{query} bar"

    @task
    def human_feedback(query: str) -> str:
        feedback = interrupt(f"Please provide feedback: {query}")
        return f"{query} {feedback}"

    @task
    def step_3(query: str) -> str:
        return f"{query} qux"

    @entrypoint(checkpointer=saver())
    def graph(query: str) -> str:
        result_1 = step_1(query).result()
        result_2 = human_feedback(result_1).result()
        return step_3(result_2).result()

    cfg = thread()
    rec.stream(graph, "foo", cfg, ["updates"])
    paused_state(rec, graph, cfg)
    rec.stream(graph, Command(resume="baz"), cfg, ["updates"])
    rec.note(op="runs", n=runs["runs"])
    paused_state(rec, graph, cfg)
