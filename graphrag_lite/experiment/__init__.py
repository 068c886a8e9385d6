"""Config-driven experiments: many variants of one project's settings, indexed with shared work and
evaluated on one question set (`graphrag-lite experiment run FILE`)."""
