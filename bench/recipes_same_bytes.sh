#!/bin/bash
# Do the README's and docs' eval / compare / agree / repro / pool plan recipes write the same
# bytes with two source trees? (issue 41: "every README and docs recipe writes the same bytes
# before and after".)
#
# Usage: bench/recipes_same_bytes.sh BASE_TREE NEW_TREE [SCRATCH]
#   BASE_TREE, NEW_TREE: source trees put on PYTHONPATH, e.g. `git worktree add /tmp/base HEAD`
#     before a change and the checkout (or a worktree holding only the change) after it; copy
#     cmrkit/_trecread*.so into a worktree to give it the compiled reader.
#   SCRATCH: a folder to work in (default /tmp/recipes-same-bytes); PYTHON: the interpreter
#     (default: this checkout's .venv/bin/python).
#
# Makes the inputs once with BASE_TREE (the sample collection, its Lucene runs bm25, fields
# --preset doc, qe rm3, the reproductions with k1 1.2 and b 0.75, an RRF fusion standing for the
# docs' dense hybrid, the README's pool judged by simulated assessors as the pooled and
# "shallow" qrels, a strata pool and its sample_eval qrels), then runs every recipe (and each
# output format, measure family and refusal beside them) with each tree in a fresh copy of the
# inputs, and compares every command's stdout, exit code and written files byte for byte, and
# its stderr but for the progress lines that say how long a step took. About 20 minutes on two
# idle cores (pool plan on six runs is most of it). Prints one line per differing file and a
# summary; exits 1 when anything differs.
set -uo pipefail
BASE=$(cd "$1" && pwd); NEW=$(cd "$2" && pwd); SCRATCH=${3:-/tmp/recipes-same-bytes}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
export COLUMNS=100 OMP_NUM_THREADS=1

inputs() {
  rm -rf "$SCRATCH/inputs" && mkdir -p "$SCRATCH/inputs" && cd "$SCRATCH/inputs" || exit 2
  c() { PYTHONPATH=$BASE "$PYTHON" -m cmrkit "$@" || { echo "inputs: cmrkit $* failed"; exit 2; }; }
  c build-collection
  c run bm25 --quiet
  c run fields --preset doc --quiet
  c run qe --method rm3 --quiet
  c run bm25 --k1 1.2 --b 0.75 --name bm25-repro --quiet
  c run qe --method rm3 --k1 1.2 --b 0.75 --name qe-rm3-repro --quiet
  c run fuse runs/sample/bm25.test.trec runs/sample/fields-doc.test.trec --name hybrid-rrf
  mkdir -p pools && head -n 50 collections/sample/topics.test.tsv > pools/sample.50.tsv
  c pool create runs/sample/bm25.test.trec runs/sample/fields-doc.test.trec \
      --topics pools/sample.50.tsv --depth 20 --qrels qrels/sample.test.txt -o pools/sample.pool.jsonl
  c judgments simulate --qrels qrels/sample.test.txt --pool pools/sample.pool.jsonl \
      --assessors 3 --noise 0.1 -o pools/round1.csv
  c judgments aggregate pools/round1.csv --pool pools/sample.pool.jsonl \
      --qrels qrels/sample.test.txt --needs-more pools/more.jsonl -o qrels/sample.pooled.txt
  cp qrels/sample.pooled.txt shallow.qrels
  c pool create runs/sample/bm25.test.trec runs/sample/fields-doc.test.trec \
      --topics pools/sample.50.tsv --strategy strata --strata 1-10:1.0,11-30:0.5,31-100:0.1 \
      --qrels qrels/sample.test.txt -o pools/strata.pool.jsonl
  c judgments simulate --qrels qrels/sample.test.txt --pool pools/strata.pool.jsonl \
      --assessors 3 --noise 0.1 -o judged.csv
  c judgments aggregate judged.csv --pool pools/strata.pool.jsonl \
      --qrels qrels/sample.test.txt -o qrels/strata.txt
  c pool sample-qrels pools/strata.pool.jsonl qrels/strata.txt -o qrels/strata.sample.txt
}

recipes() {  # recipes TREE OUT
  local tree=$1 out=$2 work=$2.work n=0
  rm -rf "$work" "$out" && mkdir -p "$out" && cp -a "$SCRATCH/inputs" "$work" && cd "$work" || exit 2
  r() {
    n=$((n + 1)); local tag; tag=$(printf "%02d" $n)
    echo "cmrkit $*" > "$out/$tag.cmd"
    PYTHONPATH=$tree "$PYTHON" -m cmrkit "$@" > "$out/$tag.out" 2> "$out/$tag.err"
    echo "$?" > "$out/$tag.rc"
  }
  local RUN=runs/sample/bm25.test.trec Q=qrels/sample.test.txt S=qrels/strata.sample.txt
  local F=runs/sample/fields-doc.test.trec QE=runs/sample/qe-rm3.test.trec
  local H=runs/sample/hybrid-rrf.test.trec
  # README: first steps, eval, compare, agree, repro, pool
  r eval $RUN $Q
  r eval $RUN $Q -m infAP -m AP@10,RR@10 --per-query
  r eval $RUN $Q -M 100 -m infAP -f trec -q
  r eval $RUN $Q -m all_trec -f trec --trec-eval 9
  r eval $RUN $Q -m all_trec -f trec -q
  r eval $RUN $Q --all-queries -f json
  r eval $RUN $Q --convention coresearch
  r eval $RUN $Q -m infAP --topics collections/sample/topics.jsonl --by type
  r eval $RUN $S -m xinfAP,infNDCG
  r compare $Q $RUN $F -c -m AP -m RR@10 --test wilcoxon --correction bh --plot-means out-means.pdf
  r agree $Q shallow.qrels runs/sample/*.test.trec -m AP -m RR@10
  r repro $QE runs/sample/qe-rm3-repro.test.trec --qrels $Q --baseline-original $RUN \
      --baseline-repro runs/sample/bm25-repro.test.trec
  r eval $RUN qrels/sample.pooled.txt -m infAP
  r pool bias pools/sample.pool.jsonl $RUN $F --qrels qrels/sample.pooled.txt
  r pool plan $RUN $F --qrels $Q --budgets 5,10,20 --per-query --plot out-plan.png
  # docs/pooling.md
  r eval $RUN $S -m xinfAP,infNDCG,AP
  r pool plan runs/sample/*.test.trec --qrels $Q --budgets 5,10,20,30,50 --per-query \
      --json out-plan.json --plot out-plan2.png
  # docs/baselines.md and docs/dense.md (their dense and reranked runs stood for by Lucene's)
  r eval $H $Q --all-queries -m RR@10 -m AP@10 -m R@10 -m R@100 -m R@500
  r eval $RUN $Q --all-queries -m RR@10 -m AP@10 -m AP@50 -m R@10 -m R@100
  r compare $Q $RUN $F $QE $H -m RR@10 -m AP@10 -m R@10 --correction holm
  r compare $Q $RUN $QE -m RR@10 -m AP@10 -m R@10
  r compare $Q $RUN $F -m RR@10
  # docs/evaluation.md
  r compare $Q $RUN $QE $F -c -m AP -m RR@10 --test wilcoxon --correction bh --all-pairs \
      --latex out-compare.tex --plot-means out-means2.pdf
  # every format, measure family and refusal beside them
  r eval $RUN $Q -f json
  r eval $RUN $Q -f csv --per-query
  r eval $RUN $Q -f trec -q
  r eval $RUN $Q -m nDCG,Bpref,Rprec,set_F,relative_P.5,yaap,NumQ,NumRel,Success@5,Judged@50 \
      -f csv --per-query -c
  r eval $RUN qrels/sample.pooled.txt -m AUC,AUC_micro,MentionRecall@64 --per-query -c -f json
  r eval $RUN $Q -m AUC
  r eval $RUN qrels/sample.pooled.txt -q -m all_trec -c -f trec -l 0 -J
  r eval $RUN qrels/sample.pooled.txt -m AP,nDCG@10 --topics collections/sample/topics.jsonl \
      --by type -f csv
  r compare $Q $RUN $QE -m AP -m nDCG -m Bpref --test t -f json
  r compare $Q $RUN $QE -m AP@10 --test permutation -f csv
  r compare $Q $RUN $QE -m RR --test bootstrap -c
  r agree $Q shallow.qrels runs/sample/*.test.trec -m nDCG@10 -m infAP -f json
  r repro $QE runs/sample/qe-rm3-repro.test.trec --qrels $Q -f json
  r compare $Q $RUN $F $QE $H -m RR@10 -m AP@10 -m R@10 --correction holm -c
  r compare $Q $RUN $F -m RR@10 -c
  r eval --help
  r compare --help
  r eval $RUN $Q -m AP@x
  r eval $RUN $Q -m Foo
  r eval $RUN $Q -m P
  r eval $RUN $Q -m Bpref@5
  r eval $RUN $Q -m ndcg_cutt.10
  r eval $RUN $Q -m RR@10 -m all_trec
  for f in out-*; do cp "$f" "$out/file.$f"; done
  cd "$SCRATCH" && rm -rf "$work"
}

inputs
recipes "$BASE" "$SCRATCH/base"
recipes "$NEW" "$SCRATCH/new"
cd "$SCRATCH" || exit 2
same=0; differ=0
for f in base/*; do
  g=new/${f#base/}
  case $f in
    *.err) [ "$(grep -v ' elapsed$' "$f")" == "$(grep -v ' elapsed$' "$g" 2>/dev/null)" ] ;;
    *) cmp -s "$f" "$g" ;;
  esac
  if [ $? -eq 0 ]; then same=$((same + 1)); else differ=$((differ + 1)); echo "differ: $f"; fi
done
echo "$(ls base/*.cmd | wc -l) commands, $((same + differ)) files compared: $same identical," \
  "$differ differ (outputs in $SCRATCH/base and $SCRATCH/new)"
[ $differ -eq 0 ]
