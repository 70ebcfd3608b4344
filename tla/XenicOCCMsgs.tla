---------------------------- MODULE XenicOCCMsgs ----------------------------
(***************************************************************************)
(* Xenic OCC with the commit point at every replica's LOG acknowledgement *)
(* (see XenicOCC), with every request and response a message in a bag,    *)
(* and crash recovery as a                                                 *)
(* sequence of steps with epochs (Xenic §4.2.1, Dandelion §4.4).           *)
(*                                                                         *)
(* The bag.  msgs is a set of messages.  A request stays in the set when   *)
(* it is handled, so it may be handled again at any later time (network    *)
(* duplication, a retransmission, late delivery) or never (loss); a        *)
(* response is consumed by the coordinator, which ignores a second answer  *)
(* from a node it has heard from in the current step, so duplicating       *)
(* responses would add only no-op steps.  Each message carries its         *)
(* sender's epoch; a node drops a message of an older epoch (the sessions  *)
(* count it) and holds one of a newer epoch until it has caught up.        *)
(*                                                                         *)
(* Handlers are guarded as in the code (nic-runtime/src/protocol/server.rs *)
(* and server/append.rs):                                                  *)
(*   Execute   no-wait locks of the written keys at the primary; a key     *)
(*             already locked, even by the same transaction (a duplicate), *)
(*             refuses; a read key locked by another transaction refuses.  *)
(*             With Fenced = TRUE the server also refuses a transaction    *)
(*             whose coordinator slot already finished that generation     *)
(*             (transaction ids are node|slot|generation; fin[n][c] is the *)
(*             newest generation of slot c that n saw finish, by COMMIT or *)
(*             ABORT).  Fenced = FALSE is the code before the fence: a    *)
(*             duplicated EXECUTE arriving after its transaction released  *)
(*             its locks re-locks them for nobody (XenicOrphanLock).       *)
(*   Validate  read keys unlocked (by others) with the version read.       *)
(*   Log       appends a pending LOG record (every replica of a written    *)
(*             key); nothing is applied.                                   *)
(*   Commit    appends a COMMIT record and applies t's writes; at a        *)
(*             primary only under t's own locks, then unlocks; a COMMIT    *)
(*             whose locks are gone installs nothing (late or duplicated)  *)
(*             and is acknowledged only if this node already holds t's     *)
(*             COMMIT record (a duplicate of one that was applied).        *)
(*   Abort     releases t's locks; acknowledged (the coordinator resends   *)
(*             it until every primary answered, or a lock could outlive    *)
(*             its transaction when an ABORT is lost).                     *)
(*   AbortLog  (an ABORT after LOG, kind ABORTLOG) appends an ABORT        *)
(*             record, which drops t's pending LOG record; a LOG of t     *)
(*             arriving later is ignored; acknowledged; locks stay.        *)
(*                                                                         *)
(* Coordinator: as XenicOCC (Execute -> Validate -> Log -> Commit, report  *)
(* after the last COMMIT ack), plus a timeout (TimeoutAbort).  In Execute  *)
(* or Validate it aborts and reports at once (no LOG record exists).  In   *)
(* Log (transactions in LogTimeout, while a LOG ack is missing) it decides *)
(* abort and sends ABORTLOG to every replica of every written key (each   *)
(* may hold t's LOG record or still receive it), resent until all          *)
(* acknowledged; only then is the abort reported, and a second round (the *)
(* plain ABORT to the primaries) releases the locks.  Broken variants:     *)
(* AbortMode = "reportearly" reports at the decision (XenicAbortReportEarly,*)
(* 13 steps: t1 times out in Log and reports abort; its LOGs, still in     *)
(* flight, reach n1 and n3 before any ABORTLOG; n2 crashes, and recovery   *)
(* finds t1's LOG on every survivor and commits it: DecisionsPreserved);   *)
(* "unlockearly" releases the locks at the ABORTLOG                        *)
(* (one round; XenicAbortUnlockEarly: t1 times out in Log, n2's ABORTLOG   *)
(* frees k2, t2 commits k2 having read the old value, n2 crashes before    *)
(* the ABORTLOGs reach n1 and n3, which hold t1's LOG records, so recovery *)
(* commits t1 too: StrictSerializableM, 21 steps).                         *)
(*                                                                         *)
(* Recovery, step by step (no operation halts the others globally):        *)
(*   Crash(S)   nodes S fail, at any time, during a recovery too (that     *)
(*              recovery is abandoned: its decisions lived only in the     *)
(*              leader and in the records already appended); messages to   *)
(*              them are gone, messages they sent may still arrive; the    *)
(*              cluster epoch goes up.  The survivors keep working in the  *)
(*              old epoch until they learn.                                *)
(*   Bump(n)    n enters the new epoch: it drops old-epoch messages from   *)
(*              now on, stops its coordinators and servers, and hands its  *)
(*              evidence (its log records and its coordinators'            *)
(*              decisions) to the recovery leader.  Nothing at n changes   *)
(*              until Apply(n), so the leader reads it when it decides.    *)
(*   Decide     the leader (lowest live node), once every live node has    *)
(*              bumped, decides every in-flight transaction and every one  *)
(*              with a LOG record but no decision record at a live node,  *)
(*              by XenicOCC's rule (live coordinator's decision; else      *)
(*              COMMIT record, or a LOG record not dropped by an ABORT     *)
(*              record on every survivor of every written key), and       *)
(*              computes each key's newest committed value.                *)
(*   Apply(n)   the Applied round: n appends a COMMIT or ABORT record for  *)
(*              each decided transaction it replicates a written key of    *)
(*              (the host applies committed writes, an ABORT record drops  *)
(*              the pending LOG record) and acknowledges to the leader.    *)
(*              The leader sees what the code's servers report: pending    *)
(*              LOG records, and decision records only of failed           *)
(*              coordinators' transactions; a live coordinator reports its *)
(*              own decision.  With KeepRecovered = TRUE (the design,      *)
(*              nic-runtime/src/recovery/epoch/unresumed.rs) n also reports, until *)
(*              it resumes, the decision records it appended here (rrec)   *)
(*              and its coordinator the decisions of its own transactions. *)
(*              KeepRecovered = FALSE (XenicForgetRecovered, 17 steps):    *)
(*              t1 at n2 logged at n1 and n2, n3 crashes, rule 4 commits   *)
(*              t1, n2 applies the COMMIT, n1 (the leader) crashes before  *)
(*              applying; the next recovery sees an undecided live         *)
(*              coordinator and no pending LOG, and aborts t1              *)
(*              (DecisionRecordsAgree).                                    *)
(*   Resume(n)  sent by the leader once every live node acknowledged       *)
(*              Apply (AppliedRound = TRUE): n learns the new placement    *)
(*              (the first surviving backup of a lost primary is           *)
(*              promoted), clears the locks of decided transactions, tells *)
(*              its coordinators' clients the outcome and resumes service. *)
(*              With AppliedRound = FALSE (XenicAppliedEarly) n resumes as *)
(*              soon as it applied itself: an abort decided because a live *)
(*              replica lacked t's LOG is reported; that replica crashes   *)
(*              before recording the ABORT; the next recovery sees t's     *)
(*              LOG on every survivor and commits it (DecisionsPreserved,  *)
(*              15 steps).                                                 *)
(*                                                                         *)
(* Checked: StrictSerializableM (SplitkvCommon's conditions; no lost       *)
(* writes once quiescent and recovered), DecisionsPreserved,               *)
(* DecisionRecordsAgree (no COMMIT and ABORT record of one transaction at  *)
(* live nodes), NoOrphanLock                                               *)
(* (no lock held by a finished transaction at a live node), and the        *)
(* property VersionsNeverDecrease (recovery included).                     *)
(*                                                                         *)
(* Models (workload MsgsTx: t1 at n2 writes k1, k2; t2 at n3 writes k2):  *)
(* XenicOCCMsgs.cfg (MaxCrashes = 2) must pass; XenicOrphanLock.cfg        *)
(* (Fenced = FALSE) must violate NoOrphanLock; XenicAppliedEarly.cfg       *)
(* (AppliedRound = FALSE) must violate DecisionsPreserved;                 *)
(* XenicForgetRecovered.cfg (KeepRecovered = FALSE) must violate           *)
(* DecisionRecordsAgree;                                                   *)
(* XenicOCCMsgs_nonvacuous.cfg and XenicOCCMsgs_recovery.cfg must violate  *)
(* NoWriteCommitWithoutCrash and NoRecoveryCommitM.  Aborts after LOG      *)
(* (LogTimeout = {t1}, one crash): XenicAbortAfterLog.cfg must pass;       *)
(* XenicAbortReportEarly.cfg and XenicAbortUnlockEarly.cfg must violate    *)
(* DecisionsPreserved and StrictSerializableM.  Non-vacuity of the new     *)
(* paths: XenicAbortAfterLog_nonvacuous (NoAbortAfterLogReported) and      *)
(* XenicOCCMsgs_redecide (NoRedecision: a recovery interrupted by a crash  *)
(* after a node applied, then decided again).                              *)
(*                                                                         *)
(* Not modelled: unknown outcomes on a client timeout (safety does not     *)
(* depend on them), the NIC cache/host log split and DMA deferral,         *)
(* multiple slots or generations per coordinator (every transaction is     *)
(* generation 1 of its coordinator's single slot), read-only transactions. *)
(* Deadlock checking is meaningless here: a request can always be          *)
(* delivered again.                                                        *)
(***************************************************************************)
EXTENDS SplitkvCommon

CONSTANTS
    Fenced,        \* BOOLEAN: servers refuse EXECUTEs of finished generations
    AppliedRound,  \* BOOLEAN: Resume only once every live node recorded the decisions
    LogTimeout,    \* SUBSET Txns: transactions whose coordinator may time out in Log
    AbortMode,     \* how an abort after LOG runs: "tworound" (the design),
                   \* "unlockearly" or "reportearly" (broken variants)
    KeepRecovered  \* BOOLEAN: recovery's decisions stay visible until Resume
                   \* (the design; FALSE is the code before the fix)

ASSUME AbortMode \in {"tworound", "unlockearly", "reportearly"}

ASSUME \A t \in Txns : WS(t) # {} /\ ~IsGetOne(t)   \* read-write transactions only

VARIABLES
    msgs,    \* the bag (a set of message records)
    epoch,   \* [Nodes -> Nat]: the epoch each node is in
    cepoch,  \* the newest epoch (raised by a crash)
    st,      \* [Nodes -> {"run", "frozen"}]: frozen from Bump to Resume
    memb,    \* [Nodes -> SUBSET Nodes]: membership (placement) each node uses
    fin,     \* [Nodes -> [Nodes -> 0..1]]: newest finished generation per coordinator slot
    rset,    \* transactions decided by the recovery in progress
    rval,    \* [Keys -> Vals]: newest committed value of each key, from Decide
    decided, \* BOOLEAN: the recovery in progress has decided
    applied, \* SUBSET Nodes: live nodes that recorded this recovery's decisions
    rdec,    \* [Txns -> {None, "commit", "abort"}]: the last recovery leader's decisions
    rrec     \* [Nodes -> SUBSET Txns]: transactions n recorded a recovery
             \* decision for (Apply) since n last resumed

rvars == <<epoch, cepoch, st, memb, fin, rset, rval, decided, applied, rdec, rrec>>
vars == <<commonVars, msgs, rvars>>

Gen(t) == 1
NoV == [k \in Keys |-> None]

Msg(kind, t, src, dst, e, ok, v) ==
    [kind |-> kind, t |-> t, src |-> src, dst |-> dst, e |-> e, ok |-> ok, v |-> v]

\* Placement under membership M (first surviving backup promoted).
PrimaryIn(M, k) == IF Primary[k] \in M THEN Primary[k]
                   ELSE CHOOSE n \in Backups[k] : n \in M
PrimKeys(M, n, ks) == {k \in ks : PrimaryIn(M, k) = n}
ReplKeys(M, n, ks) == {k \in ks : n \in Replicas(k) \cap M}

\* Keys a request of step p of t carries to n, under membership M.
KeysFor(p, M, t, n) ==
    CASE p = "execute"  -> PrimKeys(M, n, RS(t))
      [] p = "validate" -> PrimKeys(M, n, RS(t) \ WS(t))
      [] p = "log"      -> ReplKeys(M, n, WS(t))
      [] p = "commit"   -> ReplKeys(M, n, WS(t))
      [] p = "abortlog" -> ReplKeys(M, n, WS(t))
      [] p = "abort"    -> PrimKeys(M, n, WS(t))
      [] OTHER          -> {}

ReqKind(p) == CASE p = "execute" -> "EXEC" [] p = "validate" -> "VAL"
                [] p = "log" -> "LOG" [] p = "commit" -> "COMMIT"
                [] p = "abortlog" -> "ABORTLOG" [] OTHER -> "ABORT"

StepTargets(t) == LET M == memb[Coord(t)] IN
    {n \in M : KeysFor(phase[t], M, t, n) # {}}

Recovering == \E n \in alive : epoch[n] # cepoch \/ st[n] # "run"

Init ==
    /\ CommonInit
    /\ msgs = {}
    /\ epoch = [n \in Nodes |-> 0]
    /\ cepoch = 0
    /\ st = [n \in Nodes |-> "run"]
    /\ memb = [n \in Nodes |-> Nodes]
    /\ fin = [n \in Nodes |-> [c \in Nodes |-> 0]]
    /\ rset = {}
    /\ rval = [k \in Keys |-> Init0]
    /\ decided = FALSE
    /\ applied = {}
    /\ rdec = [t \in Txns |-> None]
    /\ rrec = [n \in Nodes |-> {}]

TypeOK ==
    /\ CommonTypeOK
    /\ phase \in [Txns -> {"idle", "execute", "validate", "log", "commit", "abortlog", "abort", "done"}]
    /\ st \in [Nodes -> {"run", "frozen"}]
    /\ \A m \in msgs : m.dst \in alive

-----------------------------------------------------------------------------
(* Coordinator *)

\* Enter phase p: send p's request to every target under the coordinator's
\* membership; a request to a crashed node is lost at once.
GotoSend(t, p) ==
    LET c == Coord(t)
        M == memb[c]
        T == {n \in M : KeysFor(p, M, t, n) # {}}
    IN  /\ phase' = [phase EXCEPT ![t] = p]
        /\ acked' = [acked EXCEPT ![t] = {}]
        /\ failed' = [failed EXCEPT ![t] = FALSE]
        /\ msgs' = msgs \cup {Msg(ReqKind(p), t, c, n, epoch[c], TRUE, NoV) : n \in T \cap alive}

CoordUp(t) == Coord(t) \in alive /\ st[Coord(t)] = "run"

Start(t) ==
    /\ phase[t] = "idle" /\ CoordUp(t)
    /\ GotoSend(t, "execute")
    /\ rtBefore' = [rtBefore EXCEPT ![t] = CommitsReported]
    /\ UNCHANGED <<alive, crashes, dec, reported, obs, lock, val, rec,
                   rvars>>

DecideAbort(t) ==
    /\ GotoSend(t, "abort")
    /\ dec' = [dec EXCEPT ![t] = "abort"]
    /\ reported' = [reported EXCEPT ![t] = "abort"]

Complete(t) == StepTargets(t) \subseteq acked[t] \/ failed[t]

\* The coordinator moves on after the last response of a step.
StepDone(t) ==
    /\ CoordUp(t) /\ Complete(t)
    /\ \/ /\ phase[t] \in {"execute", "validate"} /\ failed[t]
          /\ DecideAbort(t)
       \/ /\ phase[t] = "execute" /\ ~failed[t]
          /\ GotoSend(t, "validate") /\ UNCHANGED <<dec, reported>>
       \/ /\ phase[t] = "validate" /\ ~failed[t]
          /\ GotoSend(t, "log") /\ UNCHANGED <<dec, reported>>
       \/ /\ phase[t] = "log"       \* the commit point: every LOG acknowledged
          /\ GotoSend(t, "commit")
          /\ dec' = [dec EXCEPT ![t] = "commit"]
          /\ UNCHANGED reported
       \/ /\ phase[t] = "commit"
          /\ phase' = [phase EXCEPT ![t] = "done"]
          /\ reported' = [reported EXCEPT ![t] = "commit"]
          /\ UNCHANGED <<dec, acked, failed, msgs>>
       \/ /\ phase[t] = "abortlog"    \* every LOG holder recorded the ABORT
          /\ reported' = [reported EXCEPT ![t] = "abort"]
          /\ IF AbortMode = "unlockearly"
             THEN /\ phase' = [phase EXCEPT ![t] = "done"]
                  /\ UNCHANGED <<acked, failed, msgs>>
             ELSE GotoSend(t, "abort")      \* second round: unlock at the primaries
          /\ UNCHANGED dec
       \/ /\ phase[t] = "abort"
          /\ phase' = [phase EXCEPT ![t] = "done"]
          /\ UNCHANGED <<dec, reported, acked, failed, msgs>>
    /\ UNCHANGED <<alive, crashes, obs, lock, val, rec, rtBefore,
                   rvars>>

\* A participant stays silent too long: abort.  Before LOG the abort is
\* reported at once (no LOG record exists).  In Log (LogTimeout) the
\* coordinator first sends ABORT to every replica of every written key (a
\* LOG holder or a node its LOG may still reach) and reports only once all
\* acknowledged (AbortMode = "reportearly" reports at once: broken).
TimeoutAbort(t) ==
    /\ CoordUp(t)
    /\ \/ /\ phase[t] \in {"execute", "validate"}
          /\ DecideAbort(t)
       \/ /\ t \in LogTimeout /\ phase[t] = "log" /\ ~Complete(t)   \* a LOG ack is missing
          /\ GotoSend(t, "abortlog")
          /\ dec' = [dec EXCEPT ![t] = "abort"]
          /\ reported' = IF AbortMode = "reportearly"
                         THEN [reported EXCEPT ![t] = "abort"] ELSE reported
    /\ UNCHANGED <<alive, crashes, obs, lock, val, rec, rtBefore,
                   rvars>>

-----------------------------------------------------------------------------
(* Servers: a request m is handled at m.dst if that node runs in m's epoch. *)
(* The response reaches the coordinator in the same step or is lost (lost   *)
(* = TRUE); it is taken only if the coordinator is in the same epoch and    *)
(* step and has not heard from that node in this step; otherwise ignored.   *)

Handles(m, kind) ==
    /\ m \in msgs /\ m.kind = kind
    /\ st[m.dst] = "run" /\ m.e = epoch[m.dst]

Answer(m, ok, v, lost) ==
    LET t == m.t
        c == m.src
        useful == /\ ~lost /\ c \in alive /\ st[c] = "run" /\ epoch[c] = epoch[m.dst]
                  /\ phase[t] \notin {"idle", "done"} /\ m.kind = ReqKind(phase[t])
                  /\ m.dst \notin acked[t]
    IN IF useful
       THEN /\ acked' = [acked EXCEPT ![t] = @ \cup {m.dst}]
            /\ failed' = [failed EXCEPT ![t] = @ \/ ~ok]
            /\ obs' = IF ok THEN [obs EXCEPT ![t] = [k \in Keys |->
                                     IF v[k] # None THEN v[k] ELSE @[k]]]
                      ELSE obs
       ELSE UNCHANGED <<acked, failed, obs>>

\* A request of an older epoch is dropped at its destination.
DropOld(m) ==
    /\ m \in msgs /\ m.e < epoch[m.dst]
    /\ msgs' = msgs \ {m}
    /\ UNCHANGED <<commonVars, rvars>>

ExecuteL(m, lost) ==
    /\ Handles(m, "EXEC")
    /\ LET t == m.t
           n == m.dst
           K == PrimKeys(memb[n], n, RS(t))
           W == K \cap WS(t)
           fenced == Fenced /\ Gen(t) <= fin[n][Coord(t)]
           ok == /\ ~fenced
                 /\ \A k \in W : lock[n][k] = None
                 /\ \A k \in K \ W : lock[n][k] \in {None, t}
       IN /\ lock' = IF ok THEN [lock EXCEPT ![n] = [k \in Keys |->
                                    IF k \in W THEN t ELSE @[k]]]
                     ELSE lock
          /\ Answer(m, ok, IF ok THEN [k \in Keys |-> IF k \in K THEN val[n][k] ELSE None]
                           ELSE NoV, lost)
    /\ UNCHANGED <<alive, crashes, phase, dec, reported, val, rec, rtBefore, msgs, rvars>>

ValidateL(m, lost) ==
    /\ Handles(m, "VAL")
    /\ LET t == m.t
           n == m.dst
           K == PrimKeys(memb[n], n, RS(t) \ WS(t))
       IN Answer(m, \A k \in K : lock[n][k] \in {None, t} /\ val[n][k] = obs[t][k], NoV, lost)
    /\ UNCHANGED <<alive, crashes, phase, dec, reported, lock, val, rec, rtBefore,
                   msgs, rvars>>

\* A LOG that arrives after t's ABORT record (late or duplicated) is
\* ignored: it must not make a pending record again.
LogL(m, lost) ==
    /\ Handles(m, "LOG")
    /\ LET n == m.dst
           gone == \E r \in rec[n] : r.t = m.t /\ r.kind = "ABORT"
       IN /\ rec' = IF gone THEN rec
                    ELSE [rec EXCEPT ![n] = @ \cup {Record(m.t, "LOG", ReplKeys(memb[n], n, WS(m.t)))}]
          /\ Answer(m, TRUE, NoV, lost \/ gone)
    /\ UNCHANGED <<alive, crashes, phase, dec, reported, lock, val, rtBefore, msgs, rvars>>

CommitL(m, lost) ==
    /\ Handles(m, "COMMIT")
    /\ LET t == m.t
           n == m.dst
           K == ReplKeys(memb[n], n, WS(t))
           P == PrimKeys(memb[n], n, K)
           mine == \A k \in P : lock[n][k] = t
           done == \E r \in rec[n] : r.t = t /\ r.kind = "COMMIT"
       IN IF mine
          THEN /\ rec' = [rec EXCEPT ![n] = @ \cup {Record(t, "COMMIT", K)}]
               /\ val' = [val EXCEPT ![n] = [k \in Keys |->
                             IF k \in K THEN Newest(k, {@[k], t}) ELSE @[k]]]
               /\ lock' = [lock EXCEPT ![n] = [k \in Keys |-> IF k \in P THEN None ELSE @[k]]]
               /\ fin' = IF P # {} THEN [fin EXCEPT ![n][Coord(t)] = Gen(t)] ELSE fin
               /\ Answer(m, TRUE, NoV, lost)
          ELSE /\ UNCHANGED <<rec, val, lock, fin>>    \* late or duplicated
               /\ Answer(m, TRUE, NoV, lost \/ ~done)
    /\ UNCHANGED <<alive, crashes, phase, dec, reported, rtBefore, msgs,
                   epoch, cepoch, st, memb, rset, rval, decided, applied, rdec, rrec>>

AbortL(m, lost) ==
    /\ Handles(m, "ABORT")
    /\ LET t == m.t
           n == m.dst
       IN /\ lock' = [lock EXCEPT ![n] = [k \in Keys |-> IF @[k] = t THEN None ELSE @[k]]]
          /\ fin' = [fin EXCEPT ![n][Coord(t)] = Gen(t)]
    /\ Answer(m, TRUE, NoV, lost)
    /\ UNCHANGED <<alive, crashes, phase, dec, reported, val, rec, rtBefore, msgs,
                   epoch, cepoch, st, memb, rset, rval, decided, applied, rdec, rrec>>

\* ABORT after LOG: an ABORT record (the pending LOG record is dropped; a
\* later LOG of t is ignored).  Locks stay until the second round (the
\* plain ABORT), except with AbortMode = "unlockearly".
AbortLogL(m, lost) ==
    /\ Handles(m, "ABORTLOG")
    /\ LET t == m.t
           n == m.dst
       IN /\ rec' = [rec EXCEPT ![n] = @ \cup {Record(t, "ABORT", ReplKeys(memb[n], n, WS(t)))}]
          /\ lock' = IF AbortMode = "unlockearly"
                     THEN [lock EXCEPT ![n] = [k \in Keys |-> IF @[k] = t THEN None ELSE @[k]]]
                     ELSE lock
          /\ fin' = [fin EXCEPT ![n][Coord(t)] = Gen(t)]
    /\ Answer(m, TRUE, NoV, lost)
    /\ UNCHANGED <<alive, crashes, phase, dec, reported, val, rtBefore, msgs,
                   epoch, cepoch, st, memb, rset, rval, decided, applied, rdec, rrec>>

\* Each handler, for a request of t at n in the bag, with its response
\* delivered or lost.
Req(t, n, kind) == {m \in msgs : m.t = t /\ m.dst = n /\ m.kind = kind}
Execute(t, n)  == \E m \in Req(t, n, "EXEC")   : \E lost \in BOOLEAN : ExecuteL(m, lost)
Validate(t, n) == \E m \in Req(t, n, "VAL")    : \E lost \in BOOLEAN : ValidateL(m, lost)
Log(t, n)      == \E m \in Req(t, n, "LOG")    : \E lost \in BOOLEAN : LogL(m, lost)
Commit(t, n)   == \E m \in Req(t, n, "COMMIT") : \E lost \in BOOLEAN : CommitL(m, lost)
Abort(t, n)    == \E m \in Req(t, n, "ABORT")  : \E lost \in BOOLEAN : AbortL(m, lost)
AbortLog(t, n) == \E m \in Req(t, n, "ABORTLOG") : \E lost \in BOOLEAN : AbortLogL(m, lost)
DropOldAt(n)   == \E m \in msgs : m.dst = n /\ DropOld(m)

-----------------------------------------------------------------------------
(* Crash and recovery, step by step *)

\* A crash may come at any time, during a recovery too (the recovery in
\* progress is abandoned: its decisions lived only in the leader and in
\* the records already appended; the next one starts from the logs).
Crash(S) ==
    /\ CrashOK(S)
    /\ alive' = alive \ S
    /\ crashes' = crashes + 1
    /\ cepoch' = cepoch + 1
    /\ msgs' = {m \in msgs : m.dst \notin S}
    /\ rset' = {}
    /\ decided' = FALSE
    /\ applied' = {}
    /\ UNCHANGED <<phase, dec, reported, obs, acked, failed, lock, val, rec, rtBefore,
                   epoch, st, memb, fin, rval, rdec, rrec>>

Bump(n) ==
    /\ n \in alive /\ epoch[n] < cepoch
    /\ epoch' = [epoch EXCEPT ![n] = cepoch]
    /\ st' = [st EXCEPT ![n] = "frozen"]
    /\ msgs' = {m \in msgs : ~(m.dst = n /\ m.e < cepoch)}
    /\ UNCHANGED <<commonVars, cepoch, memb, fin, rset, rval, decided, applied, rdec, rrec>>

InFlightNow == {t \in Txns : phase[t] \notin {"idle", "done"}}

HasRec(n, t, kind) == \E r \in rec[n] : r.t = t /\ r.kind = kind

\* n holds t's LOG record of k and has not dropped it (no ABORT record).
HasLog(n, t, k) ==
    /\ \E r \in rec[n] : r.t = t /\ r.kind = "LOG" /\ k \in r.keys
    /\ ~HasRec(n, t, "ABORT")

\* n holds a LOG record of t without a decision: recovery must decide t,
\* even if an earlier, abandoned recovery decided it already.
Pending(n, t) == HasRec(n, t, "LOG") /\ ~HasRec(n, t, "COMMIT") /\ ~HasRec(n, t, "ABORT")

\* What the leader learns of n's records of t (Server::recovery_evidence):
\* every pending LOG record; decision records only of a failed
\* coordinator's transaction (a live coordinator speaks for its own), and,
\* with KeepRecovered, those n appended for a recovery since it last
\* resumed (rrec): a live coordinator whose transaction an abandoned
\* recovery decided may not have learned that decision.
Shown(n, t) == Coord(t) \notin alive \/ (KeepRecovered /\ t \in rrec[n])
SeenCommit(n, t) == HasRec(n, t, "COMMIT") /\ Shown(n, t)
SeenAbort(n, t) == HasRec(n, t, "ABORT") /\ Shown(n, t)
SeenLog(n, t, k) == HasLog(n, t, k) /\ (~HasRec(n, t, "COMMIT") \/ Shown(n, t))

\* The recovery rule as the code applies it (recovery/epoch/decide.rs): a live
\* coordinator's own decision (commit after its commit point, abort in an
\* abort after LOG, or, with KeepRecovered, the decision an abandoned
\* recovery gave it, Apply); else a COMMIT record; else an ABORT record;
\* else commit iff every survivor of every written key holds the LOG.
DecideFor(t) ==
    IF Coord(t) \in alive /\ dec[t] # None THEN dec[t]
    ELSE IF \E n \in alive : SeenCommit(n, t) THEN "commit"
    ELSE IF \E n \in alive : SeenAbort(n, t) THEN "abort"
    ELSE IF \A k \in WS(t) : /\ Replicas(k) \cap alive # {}
                             /\ \A n \in Replicas(k) \cap alive : SeenLog(n, t, k)
         THEN "commit" ELSE "abort"

Decide ==
    /\ ~decided /\ cepoch > 0
    /\ \A n \in alive : epoch[n] = cepoch /\ st[n] = "frozen"
    /\ LET F == InFlightNow \cup {t \in Txns : \E n \in alive : Pending(n, t)}
           D == [t \in Txns |-> IF t \in F THEN DecideFor(t) ELSE dec[t]]
           Cands(k) == {val[n][k] : n \in Replicas(k) \cap alive}
                       \cup {t \in F : D[t] = "commit" /\ k \in WS(t)
                                       /\ \E n \in Replicas(k) \cap alive : HasLog(n, t, k)}
       IN /\ rdec' = D
          \* a live coordinator learns its transactions' decisions in Apply
          /\ dec' = [t \in Txns |-> IF Coord(t) \in alive THEN dec[t] ELSE D[t]]
          /\ rset' = F
          /\ rval' = [k \in Keys |-> Newest(k, Cands(k))]
          \* transactions of crashed coordinators end here
          /\ phase' = [t \in Txns |-> IF t \in F /\ Coord(t) \notin alive THEN "done"
                                      ELSE phase[t]]
    /\ decided' = TRUE
    /\ UNCHANGED <<alive, crashes, reported, obs, acked, failed, lock, val, rec, rtBefore,
                   msgs, epoch, cepoch, st, memb, fin, applied, rrec>>

\* The Applied round: n takes the leader's decisions, appends a COMMIT or
\* ABORT record for every decided transaction that wrote a key it
\* replicates (an ABORT record drops the pending LOG record; a COMMIT
\* record lets the host apply it, so n's store takes each key's newest
\* committed value) and acknowledges to the leader.  n is frozen, so
\* nobody reads the applied values before Resume.  With KeepRecovered its
\* coordinator keeps the decisions of its own transactions, and n notes
\* the pending records it decided (rrec).
Apply(n) ==
    /\ n \in alive /\ st[n] = "frozen" /\ decided /\ n \notin applied
    /\ LET Ks(t) == {k \in WS(t) : n \in Replicas(k)}
           Kind(t) == IF rdec[t] = "commit" THEN "COMMIT" ELSE "ABORT"
           Mine == {t \in rset : Coord(t) = n}
       IN /\ rec' = [rec EXCEPT ![n] = @ \cup {Record(t, Kind(t), Ks(t)) : t \in {u \in rset : Ks(u) # {}}}]
          /\ rrec' = [rrec EXCEPT ![n] = @ \cup {t \in rset : Ks(t) # {} /\ Pending(n, t)}]
          /\ dec' = IF KeepRecovered
                    THEN [t \in Txns |-> IF t \in Mine THEN rdec[t] ELSE dec[t]]
                    ELSE dec
    /\ val' = [val EXCEPT ![n] = [k \in Keys |->
                  IF n \in Replicas(k) THEN Newest(k, {@[k], rval[k]}) ELSE @[k]]]
    /\ applied' = applied \cup {n}
    /\ UNCHANGED <<alive, crashes, phase, reported, obs, acked, failed, lock, rtBefore,
                   msgs, epoch, cepoch, st, memb, fin, rset, rval, decided, rdec>>

\* The leader sends Resume once every live node has acknowledged Apply
\* (AppliedRound); in the broken variant each node goes on as soon as it
\* has recorded the decisions itself.
ResumeOK(n) == IF AppliedRound THEN alive \subseteq applied ELSE n \in applied

Resume(n) ==
    /\ n \in alive /\ st[n] = "frozen" /\ decided /\ ResumeOK(n)
    /\ LET Mine == {t \in rset : Coord(t) = n} IN
       /\ lock' = [lock EXCEPT ![n] = [k \in Keys |-> None]]
       /\ memb' = [memb EXCEPT ![n] = alive]
       /\ st' = [st EXCEPT ![n] = "run"]
       /\ phase' = [t \in Txns |-> IF t \in Mine THEN "done" ELSE phase[t]]
       /\ dec' = [t \in Txns |-> IF t \in Mine THEN rdec[t] ELSE dec[t]]
       /\ reported' = [t \in Txns |-> IF t \in Mine /\ reported[t] = None
                                      THEN rdec[t] ELSE reported[t]]
       /\ acked' = [t \in Txns |-> IF t \in Mine THEN {} ELSE acked[t]]
       /\ failed' = [t \in Txns |-> IF t \in Mine THEN FALSE ELSE failed[t]]
       /\ rrec' = [rrec EXCEPT ![n] = {}]
       \* the recovery is over once every live node has resumed
       /\ LET last == \A u \in alive \ {n} : st[u] = "run" IN
          /\ rset' = IF last THEN {} ELSE rset
          /\ decided' = IF last THEN FALSE ELSE decided
          /\ applied' = IF last THEN {} ELSE applied
    /\ UNCHANGED <<alive, crashes, obs, val, rec, rtBefore, msgs, epoch, cepoch, fin, rval, rdec>>

-----------------------------------------------------------------------------

Finished == Terminated /\ ~Recovering /\ UNCHANGED vars

Next ==
    \/ \E t \in Txns : Start(t) \/ StepDone(t) \/ TimeoutAbort(t)
    \/ \E t \in Txns, n \in Nodes :
          Execute(t, n) \/ Validate(t, n) \/ Log(t, n) \/ Commit(t, n) \/ Abort(t, n)
          \/ AbortLog(t, n)
    \/ \E n \in Nodes : DropOldAt(n)
    \/ \E S \in SUBSET Nodes : Crash(S)
    \/ \E n \in Nodes : Bump(n) \/ Apply(n) \/ Resume(n)
    \/ Decide
    \/ Finished

Spec == Init /\ [][Next]_vars

-----------------------------------------------------------------------------
(* Correctness *)

\* No lock at a live node is held by a transaction that has finished.
NoOrphanLock ==
    \A n \in alive : \A k \in Keys :
        st[n] = "run" /\ lock[n][k] # None => phase[lock[n][k]] # "done"

StrictSerializableM ==
    /\ NoDirtyReads
    /\ Acyclic(Committed)
    /\ (Quiescent /\ ~Recovering) =>
           \A k \in Keys : \A n \in Replicas(k) \cap alive : val[n][k] = LastWriter(k)

\* Non-vacuity target: violated once the recovery leader's rule commits a
\* transaction whose coordinator crashed (Decide ignores that coordinator's
\* own decision, which died with it).
NoRecoveryCommitM ==
    ~(decided /\ \E t \in rset : Coord(t) \notin alive /\ dec[t] = "commit")

\* Non-vacuity target: violated once an abort decided in Log is reported
\* (every LOG holder acknowledged its ABORT record).
NoAbortAfterLogReported ==
    ~\E t \in Txns : reported[t] = "abort" /\ \E n \in alive : HasRec(n, t, "ABORT")
                    /\ \E m \in alive : HasRec(m, t, "LOG")

\* Non-vacuity target: violated once a recovery decides a transaction that
\* an abandoned recovery (interrupted by a crash) had already recorded an
\* abort for at a node that is still live.  With LogTimeout = {} only
\* Apply appends ABORT records (so one at a node that has not applied
\* this recovery yet comes from an earlier one).
NoRedecision ==
    ~(decided /\ \E t \in rset : \E n \in alive \ applied : HasRec(n, t, "ABORT"))

\* No transaction has a COMMIT record at one live node and an ABORT record
\* at another: a decision recorded anywhere is the one every later
\* recovery makes.
DecisionRecordsAgree ==
    \A t \in Txns : ~(\E n, m \in alive : HasRec(n, t, "COMMIT") /\ HasRec(m, t, "ABORT"))

\* Checked as a PROPERTY: no version stored at a live replica ever
\* decreases, on any step, recovery included.
VersionsNeverDecrease ==
    [][\A k \in Keys : \A n \in Replicas(k) \cap alive' :
         Pos(k, val[n][k]) <= Pos(k, val'[n][k])]_vars

=============================================================================
