import tomllib, glob, json, random
from sleepmem.adapters.embedders import UsemEmbedder
from sleepmem.pipelines.extract.frames import frames_of, prototypes_for, FRAMES
from sleepmem.pipelines.extract.text import split_sentences
from sleepmem.pipelines.language import read
import numpy as np
e = UsemEmbedder()
sents=[]
for p in sorted(glob.glob("tests/generalization/*.toml")):
    d = tomllib.load(open(p,"rb"))
    for st in d["step"]:
        em = st.get("emit")
        if em and em.get("role")=="user": sents += split_sentences(em["content"])
random.seed(1)
lo = json.load(open("../shared/data/locomo/locomo_dev8.json"))
turns=[t["text"] for c in lo for k,v in c["conversation"].items() if k.startswith("session_") and isinstance(v,list) for t in v]
sents += random.sample([s for t in turns for s in split_sentences(t)], 150)
from sleepmem.pipelines.extract.rules import _may_hold
rs = read(sents)
hold = [r.text for r in rs if _may_hold(r)]
protos = prototypes_for(e)
V = e.embed(hold); S = V @ np.asarray(protos.vectors).T
for t,row in zip(hold,S):
    best={}
    for a,x in zip(protos.attributes,row): best[a]=max(best.get(a,-1),float(x))
    r=sorted(best.items(), key=lambda kv:-kv[1])
    print(f"{r[0][1]:.2f} {r[0][1]-r[1][1]:.2f} {r[0][0]:15} {t[:90]}")
