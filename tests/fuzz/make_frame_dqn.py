#!/usr/bin/env python3
"""Writes corpus/load/current_dqn_frames.agrl: a small DQN over a frame
table (dqn.version 4; frames of 3 x 2 x 1, stacks of 2, two episodes, one
update), as the Python package saves it. make_corpus.py makes the damaged
dqn_f_* seeds from it. Run it again after a change of the format (it needs
the agrl package); the file is checked in."""
import os

import numpy as np

import agrl

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "load", "current_dqn_frames.agrl")


def main():
    d = agrl.DQN("cpu", 2 * 3 * 2, 3, 100, frame_stack=2, obs_shape=(2, 3, 2), hidden=[4], batch_size=4,
                 buffer_size=24, learning_starts=4, seed=3)
    n = 14
    frames = ((np.arange(n * 6).reshape(n, 3, 2, 1) * 37) % 251).astype(np.uint8)
    first = np.zeros(n, np.uint8)
    first[[0, 6]] = 1  # two episodes: entries 0-5 (the last an end of its own), 6-13
    action = (np.arange(n) % 3).astype(np.int32)
    reward = np.linspace(-1, 1, n).astype(np.float32)
    term = np.zeros(n, np.int32)
    term[5] = 1
    d.store_frames(frames, first, action, reward, term)
    d.train(1)
    tmp = OUT + ".tmp"
    d.save(tmp)
    os.replace(tmp, OUT)


if __name__ == "__main__":
    main()
