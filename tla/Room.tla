-------------------------------- MODULE Room --------------------------------
(***************************************************************************)
(* Room for inserts into a full table (code:                              *)
(* nic-runtime/src/protocol/server/room.rs): one shard, its primary and    *)
(* its backups, transactions that                                          *)
(* write sets of keys, some absent.  At EXECUTE the primary locks the      *)
(* write set (no-wait), finds which keys are absent, and reserves one key  *)
(* of room for each, or refuses the transaction (TableFull) when the       *)
(* shard's count plus its reservations would pass Quota.  LOG puts the     *)
(* writes in every backup's table (backups apply LOG records before the    *)
(* COMMIT), COMMIT in the primary's and turns reservations into count;     *)
(* an abort after EXECUTE releases them.                                   *)
(*                                                                         *)
(* Safety: no replica's table ever holds more than Quota keys, and the    *)
(* primary's count is exactly its table's size.  With Reserve = FALSE (the  *)
(* primary checks only its committed count, model RoomNoReservation) two   *)
(* inserts racing for the last room both pass EXECUTE and a backup ends up *)
(* over the quota: TLC finds the trace.                                    *)
(***************************************************************************)
EXTENDS Naturals, FiniteSets

CONSTANTS
    Keys,       \* keys of the shard
    Txns,       \* transactions
    W,          \* W[t]: the write set of t (a subset of Keys)
    Backups,    \* backup replicas of the shard
    Quota,      \* the shard's quota in keys
    Reserve     \* TRUE: the rule of room.rs; FALSE: count only (must fail)

VARIABLES
    phase,      \* phase[t] \in {"init", "executed", "logged", "done"}
    locks,      \* locks[k]: the transaction holding k, or "none"
    held,       \* held[t]: the keys t reserved
    count,      \* keys committed at the primary
    ptable,     \* the primary's table (committed keys)
    btable      \* btable[b]: backup b's table

vars == <<phase, locks, held, count, ptable, btable>>

Reserved == \* the reservations in flight (a key is held by at most one t)
    Cardinality(UNION {held[t] : t \in Txns})

Init ==
    /\ phase = [t \in Txns |-> "init"]
    /\ locks = [k \in Keys |-> "none"]
    /\ held = [t \in Txns |-> {}]
    /\ count = 0
    /\ ptable = {}
    /\ btable = [b \in Backups |-> {}]

\* EXECUTE at the primary: lock W[t] (no-wait), then reserve for its absent
\* keys or refuse with TableFull (locks released, t is done).
Execute(t) ==
    /\ phase[t] = "init"
    /\ LET absent == W[t] \ ptable
           n == Cardinality(absent)
           used == count + (IF Reserve THEN Reserved ELSE 0)
       IN  IF \A k \in W[t] : locks[k] = "none"
           THEN IF used + n <= Quota
                THEN /\ locks' = [k \in Keys |-> IF k \in W[t] THEN t ELSE locks[k]]
                     /\ held' = [held EXCEPT ![t] = absent]
                     /\ phase' = [phase EXCEPT ![t] = "executed"]
                ELSE /\ phase' = [phase EXCEPT ![t] = "done"]   \* TableFull
                     /\ UNCHANGED <<locks, held>>
           ELSE /\ phase' = [phase EXCEPT ![t] = "done"]        \* LockConflict
                /\ UNCHANGED <<locks, held>>
    /\ UNCHANGED <<count, ptable, btable>>

\* Another primary refused, validation failed or the procedure aborted:
\* ABORT releases the locks and the reservations.
Abort(t) ==
    /\ phase[t] = "executed"
    /\ locks' = [k \in Keys |-> IF locks[k] = t THEN "none" ELSE locks[k]]
    /\ held' = [held EXCEPT ![t] = {}]
    /\ phase' = [phase EXCEPT ![t] = "done"]
    /\ UNCHANGED <<count, ptable, btable>>

\* LOG: every backup applies the writes (the commit point follows).
Log(t) ==
    /\ phase[t] = "executed"
    /\ btable' = [b \in Backups |-> btable[b] \cup W[t]]
    /\ phase' = [phase EXCEPT ![t] = "logged"]
    /\ UNCHANGED <<locks, held, count, ptable>>

\* COMMIT at the primary: install, count the reserved keys, unlock.
Commit(t) ==
    /\ phase[t] = "logged"
    /\ ptable' = ptable \cup W[t]
    /\ count' = count + Cardinality(W[t] \ ptable)
    /\ held' = [held EXCEPT ![t] = {}]
    /\ locks' = [k \in Keys |-> IF locks[k] = t THEN "none" ELSE locks[k]]
    /\ phase' = [phase EXCEPT ![t] = "done"]
    /\ UNCHANGED btable

Finished ==
    /\ \A t \in Txns : phase[t] = "done"
    /\ UNCHANGED vars

Next ==
    \/ \E t \in Txns : Execute(t) \/ Abort(t) \/ Log(t) \/ Commit(t)
    \/ Finished

Spec == Init /\ [][Next]_vars

\* No replica holds more keys of the shard than its quota.
WithinQuota ==
    /\ Cardinality(ptable) <= Quota
    /\ \A b \in Backups : Cardinality(btable[b]) <= Quota

\* The primary's count is its table's size, and count plus reservations
\* bound every backup's table (a backup may hold logged, reserved keys).
CountExact ==
    /\ count = Cardinality(ptable)
    /\ Reserve => \A b \in Backups : Cardinality(btable[b]) <= count + Reserved

\* The models' write sets: t1 inserts k1, t2 k2, t3 k2 and k3 (with t2 a
\* conflict, without it two inserts that race t1 for a quota of 2).
WRace == [t \in Txns |-> CASE t = "t1" -> {"k1"}
                          [] t = "t2" -> {"k2"}
                          [] t = "t3" -> {"k2", "k3"}]

\* Non-vacuity: some run fills the quota exactly.
QuotaNeverFilled == Cardinality(ptable) < Quota
=============================================================================
