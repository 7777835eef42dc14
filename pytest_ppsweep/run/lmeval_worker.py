"""``python …/run/lmeval_worker.py ARGS.json``: one lm-eval evaluation of the
``[accuracy]`` task against a live server, in its own process (run/accuracy_step.py starts it;
nothing of the plugin imports this module, and it imports nothing of the plugin).

ARGS.json: ``task_dir`` (lm-eval's ``include_path``: the generated task YAML), ``task`` (its
name), ``model_args`` (lm-eval's ``local-completions``: ``base_url`` …/v1/completions, ``model``,
``num_concurrent``, ``max_retries``, ``tokenized_requests`` false, ``tokenizer_backend`` none,
``max_gen_toks``, ``timeout``), ``out`` (where the per-question answers go as JSON).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from lm_eval import simple_evaluate
from lm_eval.tasks import TaskManager


def main(argv: list[str]) -> int:
    args = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    manager = TaskManager(include_path=args["task_dir"])
    result: Any = simple_evaluate(
        model="local-completions", model_args=args["model_args"], tasks=[args["task"]],
        task_manager=manager, log_samples=True, batch_size=1, apply_chat_template=False,
        torch_random_seed=None, numpy_random_seed=None, bootstrap_iters=0,
    )
    if result is None:
        sys.stderr.write("lm-eval returned no result\n")
        return 2
    samples = []
    for s in result["samples"][args["task"]]:
        resps = s.get("resps") or [[""]]
        filtered = s.get("filtered_resps") or [""]
        samples.append({"doc_id": int(s["doc_id"]), "completion": str(resps[0][0]),
                        "extracted": str(filtered[0]),
                        "exact_match": float(s.get("exact_match", 0.0))})
    Path(args["out"]).write_text(json.dumps(
        {"results": result["results"][args["task"]], "samples": samples},
        default=str, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
