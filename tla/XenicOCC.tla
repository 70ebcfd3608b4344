------------------------------ MODULE XenicOCC ------------------------------
(***************************************************************************)
(* Xenic's OCC commit protocol (Xenic §4.2 steps 1-7) with FaRM-style      *)
(* recovery (Xenic §4.2.1).                                                *)
(*                                                                         *)
(* Code: nic-runtime/src/protocol/coordinator.rs (coordinator states       *)
(* Execute -> Validate -> Log -> Commit, or Abort) and                     *)
(* nic-runtime/src/protocol/server.rs (handle_execute, handle_validate,    *)
(* handle_log, handle_commit, handle_abort).  Server actions here carry    *)
(* the handler names without "handle_"; coordinator actions are named      *)
(* <Step>Done and fire when the last response of a step is in.             *)
(*                                                                         *)
(*   Execute(t, n)   primary n reads t's keys it owns and locks the        *)
(*                   written ones; no-wait: any key locked -> "abort".     *)
(*   Validate(t, n)  primary n checks each read-only key is unlocked and   *)
(*                   its version is the one Execute returned.              *)
(*   Log(t, n)       backup n appends a LOG record with t's writes.        *)
(*   Commit(t, n)    primary n appends a COMMIT record, installs the       *)
(*                   writes (version + 1) and unlocks.                     *)
(*   Abort(t, n)     primary n releases t's locks.                         *)
(*   Crash(S)        nodes S fail; recovery decides every in-flight        *)
(*                   transaction and rebuilds the stores (no locks left).  *)
(*                                                                         *)
(* Models (MaxCrashes = 2): XenicOCC.cfg (SkewReadOnlyTx) and              *)
(* XenicOCC_multi.cfg (ReadOnlyTx: one writer of both keys) must pass;     *)
(* XenicOCC_nonvacuous.cfg and XenicOCC_recovery.cfg must violate          *)
(* NoWriteCommitWithoutCrash and NoRecoveryCommit; XenicEarlyReport.cfg    *)
(* must violate DecisionsPreserved; XenicNoValidation.cfg (Validate        *)
(* always passes, ValidateReads = FALSE: the code's mutation switch        *)
(* splitkv_mutation = "skip_read_validation") must violate                 *)
(* StrictSerializable.                                                     *)
(*                                                                         *)
(* Install rule.  A server installs a write only if it is newer than the   *)
(* value it holds (Newest): the NIC cache never moves a version backwards, *)
(* and a COMMIT installs only under its own lock (the code refuses a late  *)
(* or duplicated COMMIT).  VersionsNeverGoBackwards checks it on every     *)
(* step without a crash.                                                   *)
(*                                                                         *)
(* Client report.  The client is told "committed" when the last COMMIT     *)
(* ack is in (ReportAtLog = FALSE).  Xenic §4.2 step 6 reports as soon as  *)
(* all LOG acks are in (ReportAtLog = TRUE); the model XenicEarlyReport    *)
(* shows that this loses a reported commit when the coordinator's node is  *)
(* the only backup of a written key and crashes before any COMMIT lands,   *)
(* because Execute never ships the written values to the primary.          *)
(*                                                                         *)
(* Recovery rule (coordinator crashed): commit iff some live node holds a  *)
(* LOG or COMMIT record of t (both are written only after validation       *)
(* passed) and every written key's new value survives in such a record;    *)
(* a live coordinator's own decision stands, undecided means abort.        *)
(*                                                                         *)
(* Simplifications:                                                        *)
(*   - a request and its response are one step; the coordinator reacts to  *)
(*     the last response in a separate step (<Step>Done);                  *)
(*   - one Execute per primary (a whole shard's keys at once); no          *)
(*     multi-shot execution, no function shipping, no multi-hop OCC, no    *)
(*     local fast path (Xenic §4.2.2-4.2.4);                               *)
(*   - on abort, Execute requests still unanswered are dropped, so locks   *)
(*     they would briefly take are not modelled;                           *)
(*   - backups apply LOG records when the coordinator truncates them,      *)
(*     which is modelled as part of CommitDone (the code's host workers    *)
(*     apply them asynchronously; no read is served by a Xenic backup);    *)
(*   - no NIC cache, DMA, host log space or epochs on messages: recovery   *)
(*     is one atomic step, so no message from an older epoch is handled;   *)
(*   - writes are read-modify-write (see SplitkvCommon).                   *)
(***************************************************************************)
EXTENDS SplitkvCommon

CONSTANT ReportAtLog   \* BOOLEAN: report commit after the LOG acks (paper) or after COMMIT acks
CONSTANT ValidateReads \* BOOLEAN: FALSE = Validate always passes (must-fail model)

vars == commonVars

(* Which keys of t a request to node n carries, per step. *)
ExecKeysAt(t, n)   == KeysPrimaryAt(n, RS(t))            \* WS(t) \subseteq RS(t)
ValKeys(t)         == RS(t) \ WS(t)
ValKeysAt(t, n)    == KeysPrimaryAt(n, ValKeys(t))
LogKeysAt(t, n)    == KeysBackupAt(n, WS(t))
CommitKeysAt(t, n) == KeysPrimaryAt(n, WS(t))

\* Step done: every target answered, or one answered "abort".
StepComplete(t, KeysAt(_, _)) == Targets(t, KeysAt) \subseteq acked[t] \/ failed[t]

TypeOK ==
    /\ CommonTypeOK
    /\ phase \in [Txns -> {"idle", "execute", "validate", "log", "commit", "abort", "done"}]

Init == CommonInit

-----------------------------------------------------------------------------
(* Coordinator *)

Start(t) ==
    /\ phase[t] = "idle" /\ Coord(t) \in alive
    /\ phase' = [phase EXCEPT ![t] = "execute"]
    /\ rtBefore' = [rtBefore EXCEPT ![t] = CommitsReported]
    /\ UNCHANGED <<alive, crashes, dec, reported, obs, acked, failed, lock, val, rec>>

\* Move t to phase p for a new step: no responses yet.
Goto(t, p) ==
    /\ phase' = [phase EXCEPT ![t] = p]
    /\ acked' = [acked EXCEPT ![t] = {}]
    /\ failed' = [failed EXCEPT ![t] = FALSE]

DecideAbort(t) ==
    /\ Goto(t, "abort")
    /\ dec' = [dec EXCEPT ![t] = "abort"]
    /\ reported' = [reported EXCEPT ![t] = "abort"]

ExecuteDone(t) ==
    /\ phase[t] = "execute" /\ StepComplete(t, ExecKeysAt)
    /\ IF failed[t] THEN DecideAbort(t)
       ELSE Goto(t, "validate") /\ UNCHANGED <<dec, reported>>
    /\ UNCHANGED <<alive, crashes, obs, lock, val, rec, rtBefore>>

ValidateDone(t) ==
    /\ phase[t] = "validate" /\ StepComplete(t, ValKeysAt)
    /\ IF failed[t] THEN DecideAbort(t)
       ELSE IF WS(t) = {}
            THEN /\ Goto(t, "done")           \* read-only: commits here
                 /\ dec' = [dec EXCEPT ![t] = "commit"]
                 /\ reported' = [reported EXCEPT ![t] = "commit"]
            ELSE Goto(t, "log") /\ UNCHANGED <<dec, reported>>
    /\ UNCHANGED <<alive, crashes, obs, lock, val, rec, rtBefore>>

LogDone(t) ==
    /\ phase[t] = "log" /\ StepComplete(t, LogKeysAt)
    /\ Goto(t, "commit")
    /\ dec' = [dec EXCEPT ![t] = "commit"]
    /\ reported' = IF ReportAtLog THEN [reported EXCEPT ![t] = "commit"] ELSE reported
    /\ UNCHANGED <<alive, crashes, obs, lock, val, rec, rtBefore>>

\* Last COMMIT ack: report, and truncate t's LOG records, which makes the
\* backups apply them (keeping the newer version if one is there already).
CommitDone(t) ==
    /\ phase[t] = "commit" /\ StepComplete(t, CommitKeysAt)
    /\ Goto(t, "done")
    /\ reported' = [reported EXCEPT ![t] = "commit"]
    /\ val' = [n \in Nodes |-> [k \in Keys |->
                 IF k \in WS(t) /\ n \in BackupsNow(k)
                 THEN Newest(k, {val[n][k], t}) ELSE val[n][k]]]
    /\ UNCHANGED <<alive, crashes, dec, obs, lock, rec, rtBefore>>

AbortDone(t) ==
    /\ phase[t] = "abort" /\ \A n \in alive : ~HoldsLock(t, n)
    /\ Goto(t, "done")
    /\ UNCHANGED <<alive, crashes, dec, reported, obs, lock, val, rec, rtBefore>>

-----------------------------------------------------------------------------
(* Servers (primary and backup handlers) *)

Execute(t, n) ==
    /\ phase[t] = "execute" /\ n \in Targets(t, ExecKeysAt) \ acked[t]
    /\ LET K  == ExecKeysAt(t, n)
           ok == \A k \in K : lock[n][k] = None
       IN /\ Respond(t, n, ok)
          /\ IF ok
             THEN /\ lock' = [lock EXCEPT ![n] = [k \in Keys |->
                                 IF k \in K \cap WS(t) THEN t ELSE @[k]]]
                  /\ obs' = [obs EXCEPT ![t] = [k \in Keys |->
                                 IF k \in K THEN val[n][k] ELSE @[k]]]
             ELSE UNCHANGED <<lock, obs>>
    /\ UNCHANGED <<alive, crashes, phase, dec, reported, val, rec, rtBefore>>

Validate(t, n) ==
    /\ phase[t] = "validate" /\ n \in Targets(t, ValKeysAt) \ acked[t]
    /\ Respond(t, n, ~ValidateReads \/
                     \A k \in ValKeysAt(t, n) : lock[n][k] = None /\ val[n][k] = obs[t][k])
    /\ UNCHANGED <<alive, crashes, phase, dec, reported, obs, lock, val, rec, rtBefore>>

Log(t, n) ==
    /\ phase[t] = "log" /\ n \in Targets(t, LogKeysAt) \ acked[t]
    /\ rec' = [rec EXCEPT ![n] = @ \cup {Record(t, "LOG", LogKeysAt(t, n))}]
    /\ Respond(t, n, TRUE)
    /\ UNCHANGED <<alive, crashes, phase, dec, reported, obs, lock, val, rtBefore>>

Commit(t, n) ==
    /\ phase[t] = "commit" /\ n \in Targets(t, CommitKeysAt) \ acked[t]
    /\ LET K == CommitKeysAt(t, n) IN
       /\ rec' = [rec EXCEPT ![n] = @ \cup {Record(t, "COMMIT", K)}]
       /\ lock[n] = [k \in Keys |-> IF k \in K THEN t ELSE lock[n][k]]  \* under its own locks
       \* Install rule: a version never goes backwards.
       /\ val' = [val EXCEPT ![n] = [k \in Keys |-> IF k \in K THEN Newest(k, {@[k], t}) ELSE @[k]]]
       /\ lock' = [lock EXCEPT ![n] = [k \in Keys |-> IF k \in K THEN None ELSE @[k]]]
    /\ Respond(t, n, TRUE)
    /\ UNCHANGED <<alive, crashes, phase, dec, reported, obs, rtBefore>>

Abort(t, n) ==
    /\ phase[t] = "abort" /\ n \in alive /\ HoldsLock(t, n)
    /\ lock' = [lock EXCEPT ![n] = [k \in Keys |-> IF @[k] = t THEN None ELSE @[k]]]
    /\ UNCHANGED <<alive, crashes, phase, dec, reported, obs, acked, failed, val, rec, rtBefore>>

-----------------------------------------------------------------------------
(* Crash and recovery (Xenic §4.2.1, FaRM) *)

HasWrite(n, t, k) ==
    \E r \in rec[n] : r.t = t /\ r.kind \in {"LOG", "COMMIT"} /\ k \in r.keys

Crash(S) ==
    /\ CrashOK(S)
    /\ LET A == alive \ S
           \* LOG and COMMIT records are written only after validation passed.
           Evidence(t) == \E n \in A : \E r \in rec[n] : r.t = t
           D == RecoveryDecisions(A, Evidence, HasWrite)
           Stored(n, k) == val[n][k]     \* Xenic stores only committed values
       IN Recover(A, D, Stored, HasWrite)
    /\ UNCHANGED <<obs, rec, rtBefore>>

Finished == Terminated /\ UNCHANGED vars

Next ==
    \/ \E t \in Txns :
        \/ Start(t) \/ ExecuteDone(t) \/ ValidateDone(t) \/ LogDone(t)
        \/ CommitDone(t) \/ AbortDone(t)
        \/ \E n \in Nodes : Execute(t, n) \/ Validate(t, n) \/ Log(t, n)
                            \/ Commit(t, n) \/ Abort(t, n)
    \/ \E S \in SUBSET Nodes : Crash(S)
    \/ Finished

Spec == Init /\ [][Next]_vars

\* Checked as a PROPERTY: outside recovery, no stored version moves backwards.
VersionsNeverGoBackwards ==
    [][crashes' = crashes =>
         \A n \in Nodes, k \in Keys : Pos(k, val[n][k]) <= Pos(k, val'[n][k])]_vars

=============================================================================
