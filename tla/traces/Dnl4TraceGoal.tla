---------------------------- MODULE Dnl4TraceGoal ----------------------------
(***************************************************************************)
(* A goal, not a property: Dnl-4 (Dnl4.tla) with no crash on a workload   *)
(* where t1 writes a key t2 reads, and an "invariant" violated once t1 is *)
(* reported committed after Lock, ValidateReads, Replicate, Unlock and    *)
(* Readable, and t2 is reported aborted by its Read validation.  TLC's    *)
(* shortest trace is the scenario sim/tests/dnl4_trace_replay.rs replays  *)
(* through the real code.                                                  *)
(*                                                                         *)
(* Workload TraceTx on the ring placement (k1: n1 primary, n2 backup; k2:  *)
(* n2, n3; k3: n3, n1):                                                    *)
(*   t1 at n1 reads k1 and k2, writes k1: Lock k1 at n1 (its own node),    *)
(*     ValidateReads k2 at n2, Replicate k1 to n2, Unlock at n1, Readable  *)
(*     at n2;                                                              *)
(*   t2 at n3 reads k1 and k3, writes k3: reads k1 at n1 and validates it *)
(*     there, so it aborts once t1 has locked or written k1.               *)
(* Every read is at the key's primary (the coordinators are no backups of  *)
(* what they read: the code's Gets go to primaries only), and no node is   *)
(* both a lock holder and a backup of one transaction.  The action         *)
(* constraint Eager keeps the orders the code can produce.                 *)
(***************************************************************************)
EXTENDS Dnl4

TraceTx ==
    [t1 |-> [c |-> "n1", r |-> {"k1", "k2"}, w |-> {"k1"}, one |-> FALSE],
     t2 |-> [c |-> "n3", r |-> {"k1", "k3"}, w |-> {"k3"}, one |-> FALSE]]

\* The known departure's workload (Dnl4DepartureGoal.cfg): t1 at n1 reads
\* and writes k1 and k2, so n2 is a lock holder (k2's primary) and a backup
\* (k1's) of t1: the spec appends COMMIT of k2 at its Unlock and COMMIT of
\* k1 at its Readable, the code one COMMIT at the Unlock.
DepartureTx ==
    [t1 |-> [c |-> "n1", r |-> {"k1", "k2"}, w |-> {"k1", "k2"}, one |-> FALSE]]

\* The code's scheduling, which TLC would otherwise not follow: a
\* coordinator takes each <Step>Done as soon as the step's last answer is
\* in, and a request to its own node is served at once (its loopback is no
\* link the replay holds).  So while one of those steps is enabled, the
\* next step is one of them (an action constraint, pruning, not a
\* property); the steps the replay delivers on held links, Start and the
\* remote server steps, wait.
DoneStep(t) ==
    ExecDone(t) \/ LockDone(t) \/ ValidateReadsDone(t) \/ ReplicateDone(t)
    \/ UnlockDone(t) \/ ReadableDone(t)
OwnNodeStep(t) ==
    \/ \E k \in Keys : ReadLocal(t, k)
    \/ Lock(t, Coord(t)) \/ ValidateReads(t, Coord(t)) \/ Replicate(t, Coord(t))
    \/ Unlock(t, Coord(t)) \/ Readable(t, Coord(t))
Eager ==
    (\E t \in Txns : ENABLED DoneStep(t) \/ ENABLED OwnNodeStep(t))
        => \E t \in Txns : DoneStep(t) \/ OwnNodeStep(t)

\* Violated once t1 is done and reported committed.
CommitNotReached == ~ (phase["t1"] = "done" /\ reported["t1"] = "commit")

\* Violated once both are done, t1 reported committed and t2 aborted.
GoalNotReached ==
    ~ /\ phase["t1"] = "done" /\ reported["t1"] = "commit"
      /\ phase["t2"] = "done" /\ reported["t2"] = "abort"
=============================================================================
