"""A command-line agent (run once per rollout by the local controller): task JSON on stdin, the model
at $OPENAI_BASE_URL, the reward POSTed to $LIGHTNINGRL_REWARD_URL."""

import json
import os
import sys

import httpx
from openai import OpenAI

task = json.load(sys.stdin)
client = OpenAI(max_retries=0)
reply = client.chat.completions.create(
    model=os.environ["LIGHTNINGRL_MODEL"],
    messages=[{"role": "user", "content": task["prompt"]}],
    max_tokens=4,
)
httpx.post(
    os.environ["LIGHTNINGRL_REWARD_URL"],
    json={
        "rollout_id": os.environ["LIGHTNINGRL_ROLLOUT_ID"],
        "attempt_id": os.environ["LIGHTNINGRL_ATTEMPT_ID"],
        "value": min(1.0, len(reply.choices[0].message.content or "") / 20),
    },
    headers={"authorization": "Bearer " + os.environ["OPENAI_API_KEY"]},
).raise_for_status()
