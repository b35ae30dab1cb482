"""The generative hostile battery's parts (tests/hostile_battery.py puts them together).

`forms` renders one payload template in each form; `payloads` lists the
families' variants (their templates are in `inside` and `outside`);
`projects` holds the small real projects and their runners; `legit` the real
fixes (their other projects in `legit_projects`); `proof` proves each trick
works on the bare runner; `judging` reproduces and verifies a candidate the
way the loop does.
"""
