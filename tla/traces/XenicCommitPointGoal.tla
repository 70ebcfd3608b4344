------------------------- MODULE XenicCommitPointGoal -------------------------
(***************************************************************************)
(* A goal, not a property: the fixed commit point (XenicOCC.tla with      *)
(* LogToAllReplicas = TRUE) on PartialReadTx, and an "invariant" that is  *)
(* violated by the step that crashes t1's coordinator n2 after t2 was    *)
(* reported committed having read t1's k2.  TLC's shortest trace is the   *)
(* commit-point counterexample's scenario on the fixed design, which     *)
(* sim/tests/tlc_trace_replay.rs replays through the real code.           *)
(***************************************************************************)
EXTENDS XenicOCC

\* Violated by the step that crashes n2 after t2 was reported committed
\* having read t1's k2 (so t2 read t1's write from n2 before the crash).
GoalNotReached ==
    [][~ /\ reported["t2"] = "commit"
         /\ obs["t2"]["k2"] = "t1"
         /\ "n2" \in alive /\ "n2" \notin alive']_vars
\* State constraint (pruning, not a property): the code's sessions deliver
\* each node pair's messages in order (go-back-N), and n2's COMMIT of t1 to
\* n3 leaves n2 before its EXECUTE answer to t2, so a replay can only give
\* t2 t1's k2 once n3 holds t1's COMMIT record.  XenicOCC has no channels
\* and would otherwise pick an order the code cannot produce.
PairOrder ==
    obs["t2"]["k2"] = "t1" => \E r \in rec["n3"] : r.t = "t1" /\ r.kind = "COMMIT"
=============================================================================
