"""Compare the retrained micro models (and task files) with the shipped ones, byte for byte."""
import json
from pathlib import Path

from gna.io import atomic_open
from gna.io import sha256_file
from gna.micro.compare import compare_model_dirs
from gna.jobs.script_job import job

with job(snakemake) as log:
    p = snakemake.params
    rows = [{"model": name, **compare_model_dirs(Path(p.shipped_dir) / name, retrained)}
            for name, retrained in zip(p.models, snakemake.input.retrained)]
    data = []
    for f in sorted(x for x in Path(snakemake.input.data).iterdir() if not x.name.startswith(".")):
        shipped = Path(p.shipped_data) / f.name
        data.append({"file": f.name, "identical": sha256_file(f) == sha256_file(shipped)})
    lines = ["# Retrained micro models against the shipped ones", "",
             "| model | identical | sha256 (shipped) | sha256 (retrained) | steps shipped / retrained | "
             "max abs diff | same config |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {'yes' if r['identical'] else 'NO'} | `{(r['sha256_shipped'] or '-')[:16]}` | "
                     f"`{(r['sha256_retrained'] or '-')[:16]}` | {r['steps_shipped']} / {r['steps_retrained']} | "
                     f"{r.get('max_abs_diff', 0.0) if not r['identical'] else 0} | {r['same_config']} |")
    lines += ["", f"Task files identical to data/micro/tasks: {sum(d['identical'] for d in data)} of {len(data)}"
              + "".join(f"; {d['file']} differs" for d in data if not d["identical"]), "",
              "Bytes match only with the same seed, config, library versions and kind of CPU; the versions "
              "used are in each model's train_config.json."]
    with atomic_open(snakemake.output.md) as f:
        f.write("\n".join(lines) + "\n")
    with atomic_open(snakemake.output.json) as f:
        json.dump({"models": rows, "data": data}, f, indent=1, sort_keys=True, default=str)
    for r in rows:
        log.info("%s: %s", r["model"], "identical" if r["identical"] else f"differs (max abs diff {r.get('max_abs_diff')})")
