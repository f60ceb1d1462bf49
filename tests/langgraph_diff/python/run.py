"""Runs the differential scenarios against LangGraph and prints one JSON line per scenario:
`{"scenario": NAME, "observations": [...]}` (or `"crash"` when the scenario itself broke).

usage: python run.py [--list] [SCENARIO...]
"""

import json
import logging
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import common  # noqa: E402
import s_channels  # noqa: E402,F401
import s_send_command  # noqa: E402,F401
import s_interrupts  # noqa: E402,F401
import s_subgraphs  # noqa: E402,F401
import s_durability  # noqa: E402,F401
import s_time_travel  # noqa: E402,F401
import s_streams  # noqa: E402,F401
import s_agents  # noqa: E402,F401
import s_nodes  # noqa: E402,F401
import s_threads  # noqa: E402,F401
import s_functional  # noqa: E402,F401
import s_create_agent  # noqa: E402,F401
import s_middleware  # noqa: E402,F401
import s_timeouts  # noqa: E402,F401
import s_error_handlers  # noqa: E402,F401


def main(argv):
    logging.disable(logging.WARNING)  # LangGraph logs dropped branches; the documents say what happened
    if argv[:1] == ["--list"]:
        print("\n".join(common.SCENARIOS))
        return 0
    names = argv or list(common.SCENARIOS)
    for name in names:
        fn = common.SCENARIOS.get(name)
        if fn is None:
            print(json.dumps({"scenario": name, "crash": "no such scenario"}))
            continue
        rec = common.Rec()
        try:
            fn(rec)
            line = {"scenario": name, "observations": rec.obs}
        except Exception:  # noqa: BLE001
            line = {"scenario": name, "crash": traceback.format_exc(limit=3)}
        print(json.dumps(line, default=repr))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
