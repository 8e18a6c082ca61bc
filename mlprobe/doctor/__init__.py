"""`mlprobe doctor`: from "the framework does not see my GPU" to the broken link, with its evidence
and the fix. The rules are data (knowledge/doctor.json); checks/ reads the captures (one module per
family); rules.py turns hits into findings; enumerate.py asks the frameworks themselves."""
