"""The runner's floor, a module per job:

- contract.py: what a stage declares, is given and returns (Stage, StageContext, StageResult); stages import
  this module only.
- definition.py: pipelines (pipelines/*.yaml), checked against the stage registry a caller gives.
- settings.py: the settings of a run (settings file, pipeline settings, --set); settings.effective.yaml.
- checks.py: what must hold before any stage runs.
- model_access.py: the run's gateway, answer cache and event loop.
- fingerprints.py: whether a stage must run again.
- runner.py: runs the stages and records what they did (records.py: pipeline_state.json and stats.json).
- display.py: the terminal's bars and lines, and the run's log file.
- dry_run.py: the model calls of a run, estimated without making one.
"""
