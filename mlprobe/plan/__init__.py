"""Plan: scan facts + recipe data -> a ranked plan. `planner.make_plan` is the entry."""
