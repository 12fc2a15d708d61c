#!/usr/bin/env bash
# The main job: installs what is missing, builds agrl, trains DQN on
# CartPole-v1 (the GPU when there is one, else the CPU) until the mean return
# of the last 20 episodes reaches 475, and writes logs, the learning curve
# and the network to runs/dqn-cartpole-s0. Extra arguments go to agrl train.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh build -DCMAKE_BUILD_TYPE=Release >/dev/null
./build/agrl train --algo dqn --env cartpole "$@"
