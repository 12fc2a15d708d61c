import sys, csv
import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt
d, title = sys.argv[1], sys.argv[2]
rows = list(csv.DictReader(open(d + '/episodes.csv')))
st = [int(r['step']) for r in rows]
fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
ax.plot(st, [float(r['return']) for r in rows], '.', ms=2, alpha=0.35, label='episode return')
ax.plot(st, [float(r['mean20']) for r in rows], lw=2, label='mean of the last 20')
ax.set_xlabel('environment steps'); ax.set_ylabel('return'); ax.set_title(title)
ax.grid(alpha=0.3); ax.legend(loc='lower right')
fig.tight_layout(); fig.savefig(d + '/learning_curve.png')
