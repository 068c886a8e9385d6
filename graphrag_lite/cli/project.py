"""`graphrag-lite init` (a new project) and `prompt-tune` (its prompts fitted to the corpus)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated

import typer

from graphrag_lite.cli.common import (
    ConfigOption,
    RootOption,
    SetOption,
    VerboseOption,
    console,
    guarded,
)
from graphrag_lite.errors import index_command


@guarded
def init(
    root: Annotated[Path, typer.Argument(help="folder for the new project (created if missing)")] = Path("."),
    root_option: Annotated[Path | None, typer.Option("--root", "-r", help="the same folder, as GraphRAG's init "
                                                     "takes it")] = None,
    force: Annotated[bool, typer.Option("--force", "-f", help="overwrite existing settings, .env and prompts")
                     ] = False,
    verbose: VerboseOption = False,
) -> None:
    """Create a project: settings.yaml, .env (with a placeholder API key), input/ and the prompt files."""
    from graphrag_lite.project import init_project

    root = root_option or root
    for path in init_project(root, force=force):
        console.print(f"wrote {path}")
    where = shlex.quote(str(root))
    console.print(f"Next:\n  1. put your documents in {root / 'input'}\n"
                  f"  2. with a model: put your API key in {root / '.env'}, then  graphrag-lite index --root {where}\n"
                  f"     with no key:   graphrag-lite index --root {where} --method fast\n"
                  f"  3. graphrag-lite query local \"Who is ...?\" --root {where}   (with no key: add --no-model)",
                  highlight=False, markup=False)


@guarded
def prompt_tune(
    root: RootOption = Path("."),
    config: ConfigOption = None,
    set_: SetOption = None,
    domain: Annotated[str | None, typer.Option("--domain", help="the corpus's domain, e.g. 'maritime law'; "
                                               "default: the model says, from the sample")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="text units sampled")] = 15,
    examples: Annotated[int, typer.Option("--examples", min=0, max=5, help="worked examples in the "
                                          "extraction prompts")] = 2,
    seed: Annotated[int, typer.Option("--seed", help="of the sample, for a reproducible tuning")] = 0,
    output: Annotated[Path | None, typer.Option("--output", help="folder of the tuned prompts; default: the "
                                                "project's prompts/")] = None,
    verbose: VerboseOption = False,
) -> None:
    """Fit the prompts to your corpus (as GraphRAG's auto-tuning): from a sample of its text, the chat model
    names the domain, the entity types and worked examples; the tuned extraction, summary and report
    prompts are written and wired in settings.yaml."""
    from graphrag_lite.config import find_config_file, load_config
    from graphrag_lite.prompt_tune import tune_project

    cfg = load_config(root, config, set_ or [])
    settings = find_config_file(root, config)
    tuning, written = tune_project(cfg, settings, output or settings.parent / "prompts", domain, limit,
                                   examples, seed)
    console.print(f"domain: {tuning.domain}\nentity types: {', '.join(tuning.entity_types)}\n"
                  f"worked examples: {len(tuning.examples)}" +
                  (f" ({tuning.unusable_examples} sample units gave no usable example; "
                   "without one the packaged example stays)" if tuning.unusable_examples else ""),
                  highlight=False, markup=False)
    for path in written:
        console.print(f"wrote {path}", highlight=False, markup=False)
    console.print(f"{settings} now names them and the entity types; next: "
                  f"{index_command(cfg.root_dir)}", highlight=False, markup=False)
