"""Time travel: replaying from an old checkpoint, update_state (as a node, on a fresh thread, at an old
checkpoint, __copy__, __input__, END, inferred), bulk_update_state, and what the history shows."""

import operator
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import StateUpdate

from common import saver, scenario, thread


class Log(TypedDict, total=False):
    log: Annotated[list, operator.add]
    last: str


def abc(**kw):
    g = StateGraph(Log)
    for n in ("a", "b", "c"):
        g.add_node(n, lambda s, n=n: {"log": [n], "last": n})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", "c")
    return g.compile(checkpointer=saver(), **kw)


def at(app, next_):
    """The config of the newest checkpoint whose next is `next_`."""
    for s in app.get_state_history(thread()):
        if list(s.next) == next_:
            return s.config
    return None


@scenario
def replaying_from_an_old_checkpoint_reruns_what_follows(rec):
    app = abc()
    rec.invoke(app, {"log": []}, thread())
    rec.invoke(app, None, at(app, ["b"]))
    rec.history(app, thread())


@scenario
def update_state_then_continue_runs_from_the_update(rec):
    app = abc(interrupt_before=["b"])
    rec.invoke(app, {"log": []}, thread())
    rec.update(app, thread(), {"log": ["fix"]}, as_node="a")
    rec.state(app, thread())
    rec.invoke(app, None, thread())
    rec.history(app, thread())


@scenario
def update_state_on_a_fresh_thread(rec):
    app = abc()
    rec.update(app, thread(), {"log": ["seed"]}, as_node="a")
    rec.state(app, thread())
    rec.invoke(app, None, thread())
    rec.history(app, thread())


@scenario
def update_state_at_an_old_checkpoint_starts_a_branch(rec):
    app = abc()
    rec.invoke(app, {"log": []}, thread())
    cfg = rec.update(app, at(app, ["c"]), {"log": ["alt"]}, as_node="b")
    rec.invoke(app, None, cfg)
    rec.history(app, thread())


@scenario
def update_state_as_copy_makes_a_sibling(rec):
    app = abc(interrupt_before=["c"])
    rec.invoke(app, {"log": []}, thread())
    rec.update(app, at(app, ["b"]), None, as_node="__copy__")
    rec.history(app, thread())


@scenario
def update_state_as_end_clears_next(rec):
    app = abc(interrupt_before=["b"])
    rec.invoke(app, {"log": []}, thread())
    rec.update(app, thread(), {"log": ["stop"]}, as_node=END)
    rec.state(app, thread())


@scenario
def update_state_as_input_starts_over(rec):
    app = abc(interrupt_before=["b"])
    rec.invoke(app, {"log": []}, thread())
    rec.update(app, thread(), {"log": ["again"]}, as_node="__input__")
    rec.state(app, thread())
    rec.invoke(app, None, thread())


@scenario
def update_state_infers_the_last_writer(rec):
    app = abc(interrupt_before=["c"])
    rec.invoke(app, {"log": []}, thread())
    rec.update(app, thread(), {"last": "patched"})
    rec.state(app, thread())


@scenario
def bulk_update_state_saves_one_checkpoint_per_superstep(rec):
    app = abc()
    try:
        app.bulk_update_state(thread(), [[StateUpdate({"log": ["x"]}, "a")], [StateUpdate({"log": ["y"]}, "b")]])
        rec.note(op="bulk_update_state", ok=True)
    except Exception as e:  # noqa: BLE001
        rec.note(op="bulk_update_state", error={"type": type(e).__name__})
    rec.state(app, thread())
    rec.history(app, thread())


@scenario
def bulk_update_state_without_supersteps_is_a_value_error(rec):
    app = abc()
    rec.invoke(app, {"log": []}, thread())
    for supersteps in ([], [[]]):
        try:
            app.bulk_update_state(thread(), supersteps)
            rec.note(op="bulk_update_state", ok=True)
        except Exception as e:  # noqa: BLE001
            # In weft's lower case.
            message = str(e)
            rec.note(op="bulk_update_state", error={"type": type(e).__name__}, message=message[:1].lower() + message[1:])
    rec.state(app, thread())
