"""The default job of `ale up`: synthesize → filter → SFT → RL (IPA, async) → evaluate, and its report.

Modules, one job each: `lock_task` (the DigitLock game as a sandbox task), `teacher` (the scripted,
deliberately imperfect expert that plays it through ale-flow), `synthesis` (teacher episodes in
sandboxes), `filtering` (the multi-stage funnel), `stats` (confidence intervals), `report`
(table, curves, report.json) and `pipeline` (the stages, against the running services).
"""
