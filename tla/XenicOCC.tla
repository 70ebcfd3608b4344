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
(* The commit point (LogToAllReplicas = TRUE).  The coordinator           *)
(* sends LOG (t's writes with their new values) to every replica of each   *)
(* written key, primary and backups; the commit point is "every replica of *)
(* every written key acknowledged its LOG".  COMMIT then goes to every     *)
(* replica too: a primary installs and unlocks; a backup appends a COMMIT  *)
(* (decision) record.  Replicas apply at the decision: a LOG record is     *)
(* held pending until t's COMMIT record is in the same log, so a LOG       *)
(* record without a decision is exactly the evidence recovery reads.       *)
(*                                                                         *)
(*   Execute(t, n)   primary n reads t's keys it owns and locks the        *)
(*                   written ones; no-wait: any key locked -> "abort".     *)
(*   Validate(t, n)  primary n checks each read-only key is unlocked and   *)
(*                   its version is the one Execute returned.              *)
(*   Log(t, n)       replica n appends a pending LOG record with t's       *)
(*                   writes of its keys (old design: backups only).        *)
(*   Commit(t, n)    replica n appends a COMMIT record and applies t's     *)
(*                   writes (version + 1); a primary does so under its     *)
(*                   own locks and then unlocks, so the unlock follows the *)
(*                   log append (Xenic step 6).  Old design: primaries     *)
(*                   only, backups apply when the coordinator finishes.    *)
(*   Abort(t, n)     primary n releases t's locks (pending LOG records of  *)
(*                   an aborted t are never applied).                      *)
(*   Crash(S)        nodes S fail; recovery decides every in-flight        *)
(*                   transaction and rebuilds the stores (no locks left).  *)
(*                                                                         *)
(* Recovery rule (coordinator crashed): commit iff a live node holds a     *)
(* COMMIT record of t, or every live replica of every written key holds    *)
(* t's LOG record (LOG is sent only after validation passed); otherwise    *)
(* abort.  A live coordinator's own decision stands, undecided means       *)
(* abort.  With f+1 replicas and at most f of them lost, a transaction     *)
(* whose commit was reported has a LOG record on every survivor of every   *)
(* written key.  Old design (LogToAllReplicas = FALSE): commit iff a live  *)
(* node holds a LOG or COMMIT record of t and every written key's new      *)
(* value survives in such a record.                                        *)
(*                                                                         *)
(* Models (MaxCrashes = 2 unless said): XenicOCC.cfg (SkewReadOnlyTx),     *)
(* XenicOCC_multi.cfg (ReadOnlyTx: one writer of both keys) and            *)
(* XenicCommitPoint.cfg (PartialReadTx: reads of part of another's writes, *)
(* same-key read-modify-writes) must pass; XenicReportAtLog.cfg (commit    *)
(* reported once all LOG acks are in, Xenic §4.2 step 6) must pass;        *)
(* XenicOCC_nonvacuous.cfg and XenicOCC_recovery.cfg must violate          *)
(* NoWriteCommitWithoutCrash and NoRecoveryCommit; XenicNoValidation.cfg   *)
(* (Validate always passes, ValidateReads = FALSE: the code's mutation     *)
(* switch splitkv_mutation = "skip_read_validation") must violate          *)
(* StrictSerializable.  Old design: XenicCommitPoint_bug.cfg (MaxCrashes = *)
(* 1; the 16-step commit-point counterexample: t2 reads t1's k2          *)
(* installed by the COMMIT at n2, n2 crashes, t1's k1 survives nowhere,    *)
(* t1 aborts) must                                                         *)
(* violate StrictSerializable; XenicEarlyReport.cfg (report at LOG acks)   *)
(* must violate DecisionsPreserved.                                        *)
(*                                                                         *)
(* Install rule.  A server installs a write only if it is newer than the   *)
(* value it holds (Newest): the NIC cache never moves a version backwards, *)
(* and a COMMIT installs at a primary only under its own lock (the code    *)
(* refuses a late or duplicated COMMIT).  VersionsNeverDecrease checks on  *)
(* every step, recovery included, that no live replica's version drops.    *)
(*                                                                         *)
(* Client report.  The client is told "committed" when the last COMMIT     *)
(* ack is in (ReportAtLog = FALSE), as the code does.  In the old design   *)
(* reporting at the LOG acks (ReportAtLog = TRUE) loses a reported commit  *)
(* when the coordinator's node is the only backup of a written key and     *)
(* crashes before any COMMIT lands (XenicEarlyReport); with LOG to every   *)
(* replica it is safe (XenicReportAtLog).                                  *)
(*                                                                         *)
(* Simplifications:                                                        *)
(*   - a request and its response are one step; the coordinator reacts to  *)
(*     the last response in a separate step (<Step>Done);                  *)
(*   - one Execute per primary (a whole shard's keys at once); no          *)
(*     multi-shot execution, no function shipping, no multi-hop OCC, no    *)
(*     local fast path (Xenic §4.2.2-4.2.4);                               *)
(*   - on abort, Execute requests still unanswered are dropped, so locks   *)
(*     they would briefly take are not modelled;                           *)
(*   - a backup's apply at COMMIT is part of the Commit step (the code's   *)
(*     host worker applies later; no read is served by a Xenic backup);    *)
(*   - no NIC cache, DMA, host log space, message loss or epochs: recovery *)
(*     is one atomic step here.  XenicOCCMsgs.tla models the messages (a   *)
(*     bag with loss, duplication and late delivery) and recovery as a     *)
(*     sequence of steps with epochs;                                      *)
(*   - writes are read-modify-write (see SplitkvCommon).                   *)
(***************************************************************************)
EXTENDS SplitkvCommon

CONSTANT ReportAtLog   \* BOOLEAN: report commit after the LOG acks (paper) or after COMMIT acks
CONSTANT ValidateReads \* BOOLEAN: FALSE = Validate always passes (must-fail model)
CONSTANT LogToAllReplicas
    \* BOOLEAN: TRUE = the commit point at every replica's LOG acknowledgement
    \* (LOG and COMMIT to every replica of each written key, replicas apply
    \* at the decision); FALSE = the old
    \* design (LOG to backups only, COMMIT to primaries only; must-fail model)

vars == commonVars

(* Which keys of t a request to node n carries, per step. *)
ExecKeysAt(t, n)   == KeysPrimaryAt(n, RS(t))            \* WS(t) \subseteq RS(t)
ValKeys(t)         == RS(t) \ WS(t)
ValKeysAt(t, n)    == KeysPrimaryAt(n, ValKeys(t))
ReplicaKeysAt(n, ks) == {k \in ks : n \in Replicas(k) \cap alive}
LogKeysAt(t, n)    == IF LogToAllReplicas THEN ReplicaKeysAt(n, WS(t))
                      ELSE KeysBackupAt(n, WS(t))
CommitKeysAt(t, n) == IF LogToAllReplicas THEN ReplicaKeysAt(n, WS(t))
                      ELSE KeysPrimaryAt(n, WS(t))

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

\* Last COMMIT ack: report.  In the old design (LogToAllReplicas = FALSE)
\* this also truncates t's LOG records, which makes the backups apply them
\* (keeping the newer version if one is there already); in the new one the
\* backups applied them when t's COMMIT reached them.
CommitDone(t) ==
    /\ phase[t] = "commit" /\ StepComplete(t, CommitKeysAt)
    /\ Goto(t, "done")
    /\ reported' = [reported EXCEPT ![t] = "commit"]
    /\ val' = IF LogToAllReplicas THEN val
              ELSE [n \in Nodes |-> [k \in Keys |->
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

\* A LOG record is held pending: nothing is applied until t's COMMIT.
Log(t, n) ==
    /\ phase[t] = "log" /\ n \in Targets(t, LogKeysAt) \ acked[t]
    /\ rec' = [rec EXCEPT ![n] = @ \cup {Record(t, "LOG", LogKeysAt(t, n))}]
    /\ Respond(t, n, TRUE)
    /\ UNCHANGED <<alive, crashes, phase, dec, reported, obs, lock, val, rtBefore>>

\* At a primary (keys P): install under its own locks, then unlock.  At a
\* backup (new design only): the COMMIT (decision) record makes the pending
\* LOG record apply.  The COMMIT record and the install are one step, so the
\* unlock follows the host-log append (Xenic step 6).
Commit(t, n) ==
    /\ phase[t] = "commit" /\ n \in Targets(t, CommitKeysAt) \ acked[t]
    /\ LET K == CommitKeysAt(t, n)
           P == KeysPrimaryAt(n, K)
       IN
       /\ rec' = [rec EXCEPT ![n] = @ \cup {Record(t, "COMMIT", K)}]
       /\ lock[n] = [k \in Keys |-> IF k \in P THEN t ELSE lock[n][k]]  \* under its own locks
       \* Install rule: a version never goes backwards.
       /\ val' = [val EXCEPT ![n] = [k \in Keys |-> IF k \in K THEN Newest(k, {@[k], t}) ELSE @[k]]]
       /\ lock' = [lock EXCEPT ![n] = [k \in Keys |-> IF k \in P THEN None ELSE @[k]]]
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

\* Crash recovery's rule for a transaction whose coordinator crashed: commit iff
\* a live node holds a COMMIT record of t, or every live replica of every
\* written key (shard) holds t's LOG record (LOG is sent only after
\* validation passed; "every", not "some", so no surviving replica misses a
\* committed write: nic-runtime/src/recovery/epoch/decide.rs).  A live
\* coordinator's decision stands; undecided means abort.
DecideAll(A) ==
    LET HasLog(n, t, k) == \E r \in rec[n] : r.t = t /\ r.kind = "LOG" /\ k \in r.keys
        Decide(t) ==
            IF Coord(t) \in A THEN IF dec[t] = "commit" THEN "commit" ELSE "abort"
            ELSE IF \/ \E n \in A : \E r \in rec[n] : r.t = t /\ r.kind = "COMMIT"
                    \/ \A k \in WS(t) : /\ Replicas(k) \cap A # {}
                                         /\ \A n \in Replicas(k) \cap A : HasLog(n, t, k)
                 THEN "commit" ELSE "abort"
    IN  [t \in Txns |-> IF t \in InFlight /\ WS(t) # {} THEN Decide(t)
                        ELSE IF t \in InFlight THEN "abort" ELSE dec[t]]

Crash(S) ==
    /\ CrashOK(S)
    /\ LET A == alive \ S
           \* Old design: any LOG or COMMIT record shows validation passed.
           Evidence(t) == \E n \in A : \E r \in rec[n] : r.t = t
           D == IF LogToAllReplicas THEN DecideAll(A)
                ELSE RecoveryDecisions(A, Evidence, HasWrite)
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

\* Checked as a PROPERTY: no version stored at a live replica ever
\* decreases, on any step, recovery included.
VersionsNeverDecrease ==
    [][\A k \in Keys : \A n \in Replicas(k) \cap alive' :
         Pos(k, val[n][k]) <= Pos(k, val'[n][k])]_vars

=============================================================================
