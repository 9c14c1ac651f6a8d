#!/bin/bash
# Never run for real: ScriptedEnv writes the reward.
grep -q done /app/out.txt && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
