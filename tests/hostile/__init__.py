"""The generative hostile battery's parts (tests/hostile_battery.py puts them together).

`forms` renders one payload template in each form, `payloads` holds the
families' templates, `projects` the small real projects and their runners,
`legit` the real fixes, `proof` proves each trick works on the bare runner,
`judging` reproduces and verifies a candidate the way the loop does.
"""
