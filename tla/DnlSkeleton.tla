----------------------------- MODULE DnlSkeleton -----------------------------
(***************************************************************************)
(* The Dandelion commit-phase skeleton (Dandelion §4.2): a lock-free       *)
(* execution phase, then Locking -> Read validation -> Replication ->      *)
(* Unlocking, each step customised by which replicas (P, B) and which set  *)
(* (R, W) it visits, any step elidable.  Protocol picks a row of Table;    *)
(* Dnl4.tla, Dnl2.tla, Dnl1.tla and DnlRO.tla are the models CI runs.      *)
(*                                                                         *)
(* Code: not written yet.  The intended modules are                        *)
(* nic-runtime/src/protocol/dnl4.rs, dnl2.rs, dnl1.rs, dnl_ro.rs and a     *)
(* recovery module; their steps should carry these action names:           *)
(*                                                                         *)
(*   Read(t, k)          Get RPC to k's primary (coordinator holds no      *)
(*                       replica of k); returns value and version even if  *)
(*                       locked or not readable (Dandelion §4.2.1);        *)
(*   ReadLocal(t, k)     the same Get served by the coordinator's own      *)
(*                       replica of k, primary or backup (Dandelion §4.3); *)
(*   GetOne(t)           single-key read, no commit phase: fails if the    *)
(*                       replica it reads is locked or not READABLE;       *)
(*   Lock(t, n)          lock t's keys at n (no-wait), checking each read  *)
(*                       version; the request logs the written values;     *)
(*   ValidateReads(t, n) primary n: read keys unlocked, versions unchanged;*)
(*   Replicate(t, n)     log t's writes at n; a backup applies them now    *)
(*                       (undo logging) and lowers READABLE;               *)
(*   Unlock(t, n)        install (commit) or drop (abort) and unlock;      *)
(*   <Step>Done(t)       coordinator: the step's last response is in;      *)
(*   Crash(S)            nodes S fail; recovery decides every in-flight    *)
(*                       transaction and rebuilds the stores.              *)
(*                                                                         *)
(* Client reports follow the rtt counts in the protocols' names: Dnl-4     *)
(* reports commit after the Unlock acks (4 rtts), Dnl-2 after the          *)
(* Replicate acks (2), Dnl-1 after the Lock acks (1).  Aborts are reported *)
(* at once, except in Dnl-1, which reports them after the Unlock acks.     *)
(* READABLE is raised when the commit is reported (the code piggybacks     *)
(* this on later messages; raising late only makes GetOnes fail more).     *)
(*                                                                         *)
(* Recovery rule.  A live coordinator's decision stands (undecided means   *)
(* abort).  For a crashed coordinator: Dnl-4 and Dnl-2 commit t iff a live *)
(* node holds a REPL or COMMIT record of t (written only once the checks   *)
(* passed); Dnl-1 commits t iff a live node holds a COMMIT record of t, or *)
(* every live replica of every key t locks holds t's LOCK and no ABORT.    *)
(* In both cases every written key's new value must survive in a live      *)
(* record (LOCK, REPL or COMMIT); otherwise t aborts and backups that      *)
(* applied its writes roll them back from their undo log.                  *)
(*                                                                         *)
(* Simplifications:                                                        *)
(*   - a request and its response are one step; per node, Lock is all or   *)
(*     nothing over the keys the request carries;                          *)
(*   - on abort, Lock requests still unanswered are dropped (the locks     *)
(*     they would briefly take are not modelled);                          *)
(*   - recovery is one atomic step (operation halts during recovery, and   *)
(*     no message from an older epoch is ever handled); the crashed node   *)
(*     is not replaced and its replicas are not rebuilt (Dandelion §4.4);  *)
(*   - the host table, the Dnl batching stack and thread-level             *)
(*     concurrency are out of scope: one step at a node is atomic;         *)
(*   - writes are read-modify-write (see SplitkvCommon); no Put/Insert/    *)
(*     Delete/PutOne; no DELETED flag.                                     *)
(***************************************************************************)
EXTENDS SplitkvCommon

CONSTANT Protocol   \* a key of Table

VARIABLES
    undo,   \* [Nodes -> [Keys -> Vals]]: backup's value before its last Replicate
    nr      \* [Nodes -> [Keys -> Txns \cup {None}]]: READABLE lowered by (None = readable)

vars == <<commonVars, undo, nr>>

(***************************************************************************)
(* The protocol table (Dandelion Table 4; DESIGN.md "Commit protocols").   *)
(*   lockAt, replAt: replicas visited ("P", "B"); lockR: lock the read set *)
(*   too; validate: Read validation step; reportCommit: step after which   *)
(*   commit is reported ("decision" = as soon as the checks passed);       *)
(*   reportAbort: likewise for abort; evidence: recovery rule; readable:   *)
(*   Replicate lowers READABLE at backups.                                 *)
(* Read-only transactions always run Dnl-RO: ValidateReads only.           *)
(*                                                                         *)
(* The rows after the first three are broken on purpose, one design        *)
(* choice undone each; check.sh requires TLC to find the named violation:  *)
(*   Dnl4NoValidation      no Read validation: write skew commits          *)
(*                         (StrictSerializable);                           *)
(*   Dnl4NoReadable        Replicate leaves READABLE up: a GetOne at a     *)
(*                         backup returns a write recovery then undoes     *)
(*                         (StrictSerializable);                           *)
(*   Dnl4EarlyReport       commit reported after the Replicate acks, not   *)
(*                         the Unlock acks (DecisionsPreserved);           *)
(*   Dnl1NoBackupLocks     Locking skips backups: a GetOne at a backup     *)
(*                         returns the value from before a reported        *)
(*                         commit (StrictSerializable);                    *)
(*   Dnl1EarlyAbortReport  abort reported before the Unlock acks: recovery *)
(*                         finds t's locks everywhere and commits it       *)
(*                         (DecisionsPreserved).                           *)
(***************************************************************************)
Dnl4Row == [lockAt |-> {"P"}, lockR |-> FALSE, validate |-> TRUE,
            replAt |-> {"B"}, reportCommit |-> "unlock",
            reportAbort |-> "decision", evidence |-> "record", readable |-> TRUE]
Dnl2Row == [lockAt |-> {"P"}, lockR |-> TRUE, validate |-> FALSE,
            replAt |-> {"P", "B"}, reportCommit |-> "replicate",
            reportAbort |-> "decision", evidence |-> "record", readable |-> TRUE]
Dnl1Row == [lockAt |-> {"P", "B"}, lockR |-> TRUE, validate |-> FALSE,
            replAt |-> {}, reportCommit |-> "decision",
            reportAbort |-> "unlock", evidence |-> "all-locked", readable |-> TRUE]

Table == [Dnl4 |-> Dnl4Row,
          Dnl2 |-> Dnl2Row,
          Dnl1 |-> Dnl1Row,
          Dnl4NoValidation     |-> [Dnl4Row EXCEPT !.validate = FALSE],
          Dnl4NoReadable       |-> [Dnl4Row EXCEPT !.readable = FALSE],
          Dnl4EarlyReport      |-> [Dnl4Row EXCEPT !.reportCommit = "replicate"],
          Dnl1NoBackupLocks    |-> [Dnl1Row EXCEPT !.lockAt = {"P"}],
          Dnl1EarlyAbortReport |-> [Dnl1Row EXCEPT !.reportAbort = "decision"]]

ASSUME Protocol \in DOMAIN Table

Row == Table[Protocol]

(* Keys of t that a step's request to node n carries. *)
PB(at, n, ks) ==
    (IF "P" \in at THEN KeysPrimaryAt(n, ks) ELSE {})
    \cup (IF "B" \in at THEN KeysBackupAt(n, ks) ELSE {})

LockKeys(t)       == IF Row.lockR THEN RS(t) ELSE WS(t)       \* WS(t) \subseteq RS(t)
LockKeysAt(t, n)  == IF WS(t) = {} THEN {} ELSE PB(Row.lockAt, n, LockKeys(t))
ValKeys(t)        == IF WS(t) = {} THEN RS(t)                  \* Dnl-RO
                     ELSE IF Row.validate THEN RS(t) \ LockKeys(t) ELSE {}
ValKeysAt(t, n)   == KeysPrimaryAt(n, ValKeys(t))
ReplKeysAt(t, n)  == PB(Row.replAt, n, WS(t))

(* The commit steps t goes through, in order. *)
Order == <<"exec", "lock", "validate", "replicate", "unlock", "done">>
Has(t, s) ==
    CASE s = "lock"      -> WS(t) # {} /\ Row.lockAt # {}
      [] s = "validate"  -> ValKeys(t) # {}
      [] s = "replicate" -> WS(t) # {} /\ Row.replAt # {}
      [] s = "unlock"    -> WS(t) # {} /\ Row.lockAt # {}
      [] s = "done"      -> TRUE
NextPhase(t, s) ==
    LET i  == CHOOSE i \in 1..Len(Order) : Order[i] = s
        js == {j \in (i + 1)..Len(Order) : Has(t, Order[j])}
    IN  Order[CHOOSE j \in js : \A j2 \in js : j <= j2]
IsCheck(s) == s \in {"exec", "lock", "validate"}

StepComplete(t, s) ==
    CASE s = "exec"      -> \A k \in RS(t) : obs[t][k] # None
      [] s = "lock"      -> Targets(t, LockKeysAt) \subseteq acked[t] \/ failed[t]
      [] s = "validate"  -> Targets(t, ValKeysAt) \subseteq acked[t] \/ failed[t]
      [] s = "replicate" -> Targets(t, ReplKeysAt) \subseteq acked[t]
      [] s = "unlock"    -> \A n \in alive : ~HoldsLock(t, n)

TypeOK ==
    /\ CommonTypeOK
    /\ phase \in [Txns -> {"idle", "done"} \cup {Order[i] : i \in 1..Len(Order)}]
    /\ undo \in [Nodes -> [Keys -> Vals]]
    /\ nr \in [Nodes -> [Keys -> Txns \cup {None}]]

Init ==
    /\ CommonInit
    /\ undo = [n \in Nodes |-> [k \in Keys |-> Init0]]
    /\ nr = [n \in Nodes |-> [k \in Keys |-> None]]

-----------------------------------------------------------------------------
(* Execution phase *)

Start(t) ==
    /\ phase[t] = "idle" /\ ~IsGetOne(t) /\ Coord(t) \in alive
    /\ phase' = [phase EXCEPT ![t] = "exec"]
    /\ rtBefore' = [rtBefore EXCEPT ![t] = CommitsReported]
    /\ UNCHANGED <<alive, crashes, dec, reported, obs, acked, failed, lock, val, rec, undo, nr>>

DoRead(t, k) ==
    /\ phase[t] = "exec" /\ k \in RS(t) /\ obs[t][k] = None
    /\ obs' = [obs EXCEPT ![t][k] = val[ReadNode(t, k)][k]]
    /\ UNCHANGED <<alive, crashes, phase, dec, reported, acked, failed, lock, val, rec,
                   rtBefore, undo, nr>>

Read(t, k)      == ~IsLocalRead(t, k) /\ DoRead(t, k)
ReadLocal(t, k) == IsLocalRead(t, k) /\ DoRead(t, k)

\* Single-key read at the coordinator's replica if it has one, else at the
\* primary; it has no commit phase, so it refuses locked or unreadable keys.
GetOne(t) ==
    /\ phase[t] = "idle" /\ IsGetOne(t) /\ Coord(t) \in alive
    /\ LET k  == CHOOSE k \in RS(t) : TRUE
           n  == ReadNode(t, k)
           ok == lock[n][k] = None /\ nr[n][k] = None
           d  == IF ok THEN "commit" ELSE "abort"
       IN /\ dec' = [dec EXCEPT ![t] = d]
          /\ reported' = [reported EXCEPT ![t] = d]
          /\ obs' = IF ok THEN [obs EXCEPT ![t][k] = val[n][k]] ELSE obs
          /\ rtBefore' = [rtBefore EXCEPT ![t] = CommitsReported]
    /\ phase' = [phase EXCEPT ![t] = "done"]
    /\ UNCHANGED <<alive, crashes, acked, failed, lock, val, rec, undo, nr>>

-----------------------------------------------------------------------------
(* Coordinator: react to the last response of step s of t *)

StepDone(t, s) ==
    /\ StepComplete(t, s)
    /\ acked' = [acked EXCEPT ![t] = {}]
    /\ failed' = [failed EXCEPT ![t] = FALSE]
    /\ IF failed[t]
       THEN \* a lock or a validation was refused: abort
            LET nxt == IF Has(t, "unlock") THEN "unlock" ELSE "done" IN
            /\ phase' = [phase EXCEPT ![t] = nxt]
            /\ dec' = [dec EXCEPT ![t] = "abort"]
            /\ reported' = IF Row.reportAbort = "decision" \/ nxt = "done"
                           THEN [reported EXCEPT ![t] = "abort"] ELSE reported
            /\ UNCHANGED nr
       ELSE
            LET nxt    == NextPhase(t, s)
                decide == IsCheck(s) /\ ~IsCheck(nxt)     \* every check passed
                d      == IF decide THEN "commit" ELSE dec[t]
                report == /\ reported[t] = None
                          /\ \/ nxt = "done"
                             \/ d = "commit" /\ decide /\ Row.reportCommit = "decision"
                             \/ d = "commit" /\ s = Row.reportCommit
            IN
            /\ phase' = [phase EXCEPT ![t] = nxt]
            /\ dec' = [dec EXCEPT ![t] = d]
            /\ reported' = IF report THEN [reported EXCEPT ![t] = d] ELSE reported
            \* the commit is reported: READABLE may be raised again
            /\ nr' = IF report /\ d = "commit"
                     THEN [n \in Nodes |-> [k \in Keys |-> IF nr[n][k] = t THEN None ELSE nr[n][k]]]
                     ELSE nr
    /\ UNCHANGED <<alive, crashes, obs, lock, val, rec, rtBefore, undo>>

\* (The phase test is repeated in each so that TLC's traces name the step.)
ExecDone(t)          == phase[t] = "exec"      /\ StepDone(t, "exec")
LockDone(t)          == phase[t] = "lock"      /\ StepDone(t, "lock")
ValidateReadsDone(t) == phase[t] = "validate"  /\ StepDone(t, "validate")
ReplicateDone(t)     == phase[t] = "replicate" /\ StepDone(t, "replicate")
UnlockDone(t)        == phase[t] = "unlock"    /\ StepDone(t, "unlock")

-----------------------------------------------------------------------------
(* Servers *)

Lock(t, n) ==
    /\ phase[t] = "lock" /\ n \in Targets(t, LockKeysAt) \ acked[t]
    /\ LET K  == LockKeysAt(t, n)
           ok == \A k \in K : lock[n][k] = None /\ val[n][k] = obs[t][k]
       IN /\ Respond(t, n, ok)
          /\ IF ok
             THEN /\ lock' = [lock EXCEPT ![n] = [k \in Keys |-> IF k \in K THEN t ELSE @[k]]]
                  /\ rec' = [rec EXCEPT ![n] = @ \cup {Record(t, "LOCK", K)}]
             ELSE UNCHANGED <<lock, rec>>
    /\ UNCHANGED <<alive, crashes, phase, dec, reported, obs, val, rtBefore, undo, nr>>

ValidateReads(t, n) ==
    /\ phase[t] = "validate" /\ n \in Targets(t, ValKeysAt) \ acked[t]
    /\ Respond(t, n, \A k \in ValKeysAt(t, n) : lock[n][k] = None /\ val[n][k] = obs[t][k])
    /\ UNCHANGED <<alive, crashes, phase, dec, reported, obs, lock, val, rec, rtBefore, undo, nr>>

Replicate(t, n) ==
    /\ phase[t] = "replicate" /\ n \in Targets(t, ReplKeysAt) \ acked[t]
    /\ LET K  == ReplKeysAt(t, n)
           KB == KeysBackupAt(n, K)      \* backups apply now, keeping an undo record
       IN /\ rec' = [rec EXCEPT ![n] = @ \cup {Record(t, "REPL", K)}]
          /\ undo' = [undo EXCEPT ![n] = [k \in Keys |-> IF k \in KB THEN val[n][k] ELSE @[k]]]
          /\ val' = [val EXCEPT ![n] = [k \in Keys |-> IF k \in KB THEN t ELSE @[k]]]
          /\ nr' = IF Row.readable
                   THEN [nr EXCEPT ![n] = [k \in Keys |-> IF k \in KB THEN t ELSE @[k]]]
                   ELSE nr
    /\ Respond(t, n, TRUE)
    /\ UNCHANGED <<alive, crashes, phase, dec, reported, obs, lock, rtBefore>>

Unlock(t, n) ==
    /\ phase[t] = "unlock" /\ n \in alive /\ HoldsLock(t, n)
    /\ LET K  == {k \in Keys : lock[n][k] = t}
           KW == IF dec[t] = "commit" THEN K \cap WS(t) ELSE {}
       IN /\ lock' = [lock EXCEPT ![n] = [k \in Keys |-> IF k \in K THEN None ELSE @[k]]]
          /\ val' = [val EXCEPT ![n] = [k \in Keys |-> IF k \in KW THEN t ELSE @[k]]]
          /\ rec' = [rec EXCEPT ![n] = @ \cup
                        {Record(t, IF dec[t] = "commit" THEN "COMMIT" ELSE "ABORT", K)}]
    /\ UNCHANGED <<alive, crashes, phase, dec, reported, obs, acked, failed, rtBefore, undo, nr>>

-----------------------------------------------------------------------------
(* Crash and recovery (Dandelion §4.4) *)

HasRec(n, t, kinds) == \E r \in rec[n] : r.t = t /\ r.kind \in kinds
HasWrite(n, t, k) ==
    \E r \in rec[n] : r.t = t /\ r.kind \in {"LOCK", "REPL", "COMMIT"} /\ k \in r.keys

Crash(S) ==
    /\ CrashOK(S)
    /\ LET A == alive \ S
           \* lock targets of t before the crash
           LockNodes(t, k) == {n \in alive : k \in LockKeysAt(t, n)}
           Evidence(t) ==
               IF Row.evidence = "record"
               THEN \E n \in A : HasRec(n, t, {"REPL", "COMMIT"})
               ELSE \/ \E n \in A : HasRec(n, t, {"COMMIT"})
                    \/ \A k \in LockKeys(t) : \A n \in LockNodes(t, k) \cap A :
                           /\ \E r \in rec[n] : r.t = t /\ r.kind = "LOCK" /\ k \in r.keys
                           /\ ~HasRec(n, t, {"ABORT"})
           D == RecoveryDecisions(A, Evidence, HasWrite)
           \* a backup rolls back a replicated write that does not commit
           Stable(n, k) == IF val[n][k] # Init0 /\ D[val[n][k]] # "commit"
                           THEN undo[n][k] ELSE val[n][k]
       IN Recover(A, D, Stable, HasWrite)
    /\ nr' = [n \in Nodes |-> [k \in Keys |-> None]]
    /\ UNCHANGED <<obs, rec, rtBefore, undo>>

Finished == Terminated /\ UNCHANGED vars

Next ==
    \/ \E t \in Txns :
        \/ Start(t) \/ GetOne(t)
        \/ ExecDone(t) \/ LockDone(t) \/ ValidateReadsDone(t) \/ ReplicateDone(t) \/ UnlockDone(t)
        \/ \E k \in Keys : Read(t, k) \/ ReadLocal(t, k)
        \/ \E n \in Nodes : Lock(t, n) \/ ValidateReads(t, n) \/ Replicate(t, n) \/ Unlock(t, n)
    \/ \E S \in SUBSET Nodes : Crash(S)
    \/ Finished

Spec == Init /\ [][Next]_vars

\* Non-vacuity for Dnl-RO: no read-only transaction ever commits having
\* read a value some transaction wrote.
NoReadOnlyCommitSeesWrite ==
    \A t \in Txns : (WS(t) = {} /\ ~IsGetOne(t) /\ dec[t] = "commit")
                       => \A k \in RS(t) : obs[t][k] = Init0

\* Non-vacuity for GetOne: none ever returns a written value without a
\* crash (so READABLE and locks are released again on the normal path).
NoGetOneSeesWriteWithoutCrash ==
    crashes = 0 => \A t \in Txns : (IsGetOne(t) /\ dec[t] = "commit")
                                   => \A k \in RS(t) : obs[t][k] = Init0
=============================================================================
