"""The paper's experiments as functions of results: which interventions each job applies
(derived from earlier results, never typed in) and how a job's rows are produced."""
