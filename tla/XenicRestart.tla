----------------------------- MODULE XenicRestart -----------------------------
(***************************************************************************)
(* A NIC runtime that crashes alone and restarts (the NIC restart after a *)
(* NIC-runtime-only crash; code: nic-runtime/src/recovery/restart.rs,     *)
(* recovery/restart/{messages,decide}.rs, protocol/server/rebuild.rs,       *)
(* protocol/coordinator/rebuild.rs; Xenic §4.2.1 (a): locks live only in   *)
(* the NIC index), on top of the message-bag model XenicOCCMsgs, whose     *)
(* actions are reused unchanged, guarded where a rebuilding node differs.  *)
(*                                                                         *)
(* NicRestart(n)  n's NIC runtime loses its volatile state: every lock at  *)
(*                n (lock[n]), and its coordinator's transactions in       *)
(*                flight (phase "lost"; their clients hear Unknown, so     *)
(*                reported stays None).  Kept, because they are host       *)
(*                memory or mirror it: the host table (val), the host log  *)
(*                with its LOG / COMMIT / ABORT records (rec; the DMA      *)
(*                appends posted before the crash complete first), the     *)
(*                per-slot record table and fence (fin), the membership    *)
(*                view.  A new incarnation: every message to n is dropped. *)
(*                n then starts no transaction and queries every peer.     *)
(* AnswerQuery(p, n)  peer p: drops the packets of n's old incarnation and *)
(*                its own earlier ones to n (session reset), releases the  *)
(*                locks of n's lost transactions that have no LOG at p,    *)
(*                and reports (a snapshot): its transactions' locks at n,  *)
(*                those waiting for n's answer (with their phase), those   *)
(*                touching n, and the records p holds of n's transactions. *)
(* TakeReport(m)  n, per report: takes each reported lock again (not for   *)
(*                a transaction committed at n), answers the               *)
(*                waiting ones from its host log (EXECUTE / VALIDATE:      *)
(*                Unavailable, the coordinator aborts; LOG: Ok if the LOG  *)
(*                record is here, else Unavailable and the coordinator     *)
(*                sends the LOG again, log_again; COMMIT: the COMMIT       *)
(*                record is appended and acknowledged), keeps the records, *)
(*                and aborts a pending LOG of p that p did not report.     *)
(*                Until p's report is in, nothing from p is handled at n;  *)
(*                after it, LOG / COMMIT / ABORT are, EXECUTE / VALIDATE   *)
(*                are refused (Refuse) until the rebuild is done.          *)
(* RebuildDone(n) all reports in: each lost transaction is decided by the  *)
(*                commit-point rule (restart/decide.rs                     *)
(*                commit_point_reached: abort on an ABORT record; commit   *)
(*                on a COMMIT record, or if every live replica of every    *)
(*                written key holds its LOG), recorded at n and sent to    *)
(*                the peers holding records (ApplyDec); n serves again.    *)
(*                A lost transaction is "done" once every peer applied.    *)
(*                                                                         *)
(* Broken variants (one design choice undone each): RebuildGate = FALSE    *)
(* serves EXECUTE / VALIDATE while rebuilding; RelockFromCoords = FALSE    *)
(* takes no lock back from the reports; LogAgain = FALSE counts a LOG the  *)
(* restarted replica lost as acknowledged instead of sending it again.     *)
(*                                                                         *)
(* Models (workload RestartTx, one restart, no crash): XenicRestart.cfg   *)
(* must pass; XenicRestartServeEarly.cfg and XenicRestartNoRelock.cfg must *)
(* violate StrictSerializableM (20 and 23 states), _locks LocksRebuilt     *)
(* (10), XenicRestartNoLogAgain.cfg CommitPointHolds (10); non-vacuity:    *)
(* XenicRestart_nonvacuous (NoRebuildCommit), _relock, _logagain.  With    *)
(* MaxCrashes = 1 the model passes as well (by hand, 18 min: README);     *)
(* XenicRestart_abortlog.cfg (two-round abort after LOG, t1) must pass.    *)
(*                                                                         *)
(* Bounds (see tla/README.md): at most MaxNicRestarts restarts, one        *)
(* rebuild at a time; a restart only outside a recovery epoch (the code    *)
(* does not handle a NIC crash during one) and a node crash only when no   *)
(* rebuild and no rebuild decision is under way (the code waits for a     *)
(* crashed peer until a configuration excludes it; not modelled).  One     *)
(* generation per coordinator slot, so the generation reuse of a restarted *)
(* coordinator (its slots start again at generation 1) is not modelled.    *)
(***************************************************************************)
EXTENDS XenicOCCMsgs

CONSTANTS
    MaxNicRestarts,    \* NIC-runtime-only restarts allowed
    RebuildGate,       \* BOOLEAN: a rebuilding node refuses EXECUTE / VALIDATE
    RelockFromCoords,  \* BOOLEAN: locks are taken again from the coordinators' reports
    LogAgain           \* BOOLEAN: a LOG lost by the restart is sent again

\* The restart workload: t1 (n2) reads and writes k1 and k2; t2 (n3) reads
\* and writes k1, whose primary n1 coordinates neither, so a lock lost at
\* n1 lets the other writer in.
RestartTx ==
    [t1 |-> [c |-> "n2", r |-> {"k1", "k2"}, w |-> {"k1", "k2"}, one |-> FALSE],
     t2 |-> [c |-> "n3", r |-> {"k1"}, w |-> {"k1"}, one |-> FALSE]]

VARIABLES
    nrs,       \* NIC restarts so far
    rbst,      \* [Nodes -> {"serving", "rebuilding"}]
    rbq,       \* [Nodes -> SUBSET Nodes]: peers that have not answered n's query
    rbw,       \* [Nodes -> SUBSET Nodes]: peers whose report n has not taken
    rbrec,     \* [Nodes -> set of [h, r]]: peers' records of n's lost transactions
    rmsgs,     \* REPORT and DEC messages in flight (delivered once: sessions)
    relocked,  \* history: <<n, t>> whose lock n took again from a report
    resent,    \* history: transactions whose LOG was sent again
    rebuilt    \* history: lost transactions a rebuild decided

xvars == <<nrs, rbst, rbq, rbw, rbrec, rmsgs, relocked, resent, rebuilt>>
varsR == <<vars, xvars>>

Rebuilding(n) == rbst[n] = "rebuilding"
AnyRebuild == (\E n \in Nodes : Rebuilding(n)) \/ rmsgs # {}

InitR ==
    /\ Init
    /\ nrs = 0
    /\ rbst = [n \in Nodes |-> "serving"]
    /\ rbq = [n \in Nodes |-> {}]
    /\ rbw = [n \in Nodes |-> {}]
    /\ rbrec = [n \in Nodes |-> {}]
    /\ rmsgs = {}
    /\ relocked = {}
    /\ resent = {}
    /\ rebuilt = {}

TypeOKR ==
    /\ CommonTypeOK
    /\ phase \in [Txns -> {"idle", "execute", "validate", "log", "commit", "abortlog",
                           "abort", "done", "lost"}]
    /\ st \in [Nodes -> {"run", "frozen"}]
    /\ rbst \in [Nodes -> {"serving", "rebuilding"}]
    /\ \A m \in msgs : m.dst \in alive

-----------------------------------------------------------------------------
(* The restarted node *)

NicRestart(n) ==
    /\ nrs < MaxNicRestarts /\ n \in alive /\ ~Recovering /\ ~AnyRebuild
    /\ LET L == {t \in Txns : Coord(t) = n /\ phase[t] \notin {"idle", "done"}} IN
       /\ phase' = [t \in Txns |-> IF t \in L THEN "lost" ELSE phase[t]]
       \* a late answer to a lost transaction is stale (acked = Nodes: ignored)
       /\ acked' = [t \in Txns |-> IF t \in L THEN Nodes ELSE acked[t]]
       /\ failed' = [t \in Txns |-> IF t \in L THEN FALSE ELSE failed[t]]
    /\ lock' = [lock EXCEPT ![n] = [k \in Keys |-> None]]
    /\ msgs' = {m \in msgs : m.dst # n}
    /\ nrs' = nrs + 1
    /\ rbst' = [rbst EXCEPT ![n] = "rebuilding"]
    /\ rbq' = [rbq EXCEPT ![n] = alive \ {n}]
    /\ rbw' = [rbw EXCEPT ![n] = alive \ {n}]
    /\ rbrec' = [rbrec EXCEPT ![n] = {}]
    /\ UNCHANGED <<alive, crashes, dec, reported, obs, val, rec, rtBefore, rvars,
                   rmsgs, relocked, resent, rebuilt>>

\* What p's coordinator knows of t at n (coordinator/rebuild.rs): t holds
\* locks at n once n answered its EXECUTE (no refusal in the phase), until n
\* acknowledged its COMMIT; t waits for n's answer in its current phase.
LockedAt(t, n) ==
    \/ phase[t] = "execute" /\ n \in acked[t] /\ ~failed[t]
    \/ phase[t] \in {"validate", "log", "abortlog"}
    \/ phase[t] = "commit" /\ n \notin acked[t]
\* (an abort after LOG, reported as Log, waits for no answer: its ABORT
\* is resent after the report, as the code's deadline resends it)
Active(t) == phase[t] \in {"execute", "validate", "log", "commit", "abortlog"}
WaitsOn(t, n) == Active(t) /\ phase[t] # "abortlog" /\ n \in StepTargets(t) \ acked[t]
LoggedAt(t, n) == phase[t] \in {"log", "commit", "abortlog"} /\ ReplKeys(memb[Coord(t)], n, WS(t)) # {}

AnswerQuery(p, n) ==
    /\ p \in rbq[n] /\ p \in alive
    /\ LET Mine == {t \in Txns : Coord(t) = p /\ Active(t)}
           Lk == {<<t, k>> \in Mine \X Keys :
                    k \in PrimKeys(memb[p], n, WS(t)) /\ LockedAt(t, n)}
           W == {t \in Mine : WaitsOn(t, n)}
           Touch == {t \in Mine : WaitsOn(t, n) \/ LockedAt(t, n) \/ LoggedAt(t, n)}
           Recs == {[h |-> p, r |-> r] : r \in {x \in rec[p] : Coord(x.t) = n}}
           Orphan(t) == Coord(t) = n /\ ~HasRec(p, t, "LOG")
       IN /\ rmsgs' = rmsgs \cup {[kind |-> "REPORT", src |-> p, dst |-> n, locks |-> Lk,
                                   wait |-> {<<t, phase[t]>> : t \in W}, txs |-> Touch,
                                   recs |-> Recs]}
          /\ lock' = [lock EXCEPT ![p] = [k \in Keys |->
                         IF @[k] # None /\ Orphan(@[k]) THEN None ELSE @[k]]]
    \* session reset: n's old packets to p, and p's earlier ones to n, are gone
    /\ msgs' = {m \in msgs : ~(m.src = n /\ m.dst = p) /\ ~(m.src = p /\ m.dst = n)}
                \cup {Msg("ABORTLOG", t, p, n, epoch[p], TRUE, NoV) :
                        t \in {u \in Txns : Coord(u) = p /\ phase[u] = "abortlog"
                                           /\ n \in StepTargets(u) \ acked[u]}}
    \* an ABORT owes no answer in the code (the model's ABORT acks are a stand-in)
    /\ acked' = [t \in Txns |-> IF Coord(t) = p /\ phase[t] = "abort" THEN acked[t] \cup {n}
                                ELSE acked[t]]
    /\ rbq' = [rbq EXCEPT ![n] = @ \ {p}]
    /\ UNCHANGED <<alive, crashes, phase, dec, reported, obs, failed, val, rec, rtBefore,
                   rvars, nrs, rbst, rbw, rbrec, relocked, resent, rebuilt>>

\* Records appended at n for decided transactions D (kind per t).
DecRecs(n, D, Kind(_)) == {Record(t, Kind(t), ReplKeys(memb[n], n, WS(t))) : t \in D}
\* n's store after applying the committed transactions C.
ApplyVals(n, C) == [val EXCEPT ![n] = [k \in Keys |->
                       Newest(k, {@[k]} \cup {t \in C : k \in WS(t) /\ n \in Replicas(k)})]]

TakeReport(m) ==
    /\ m \in rmsgs /\ m.kind = "REPORT"
    /\ LET n == m.dst
           p == m.src
           \* not for a transaction committed here (an ABORT record of an abort
           \* after LOG keeps its locks until the second round)
           Decided(t) == HasRec(n, t, "COMMIT")
           Re == IF RelockFromCoords THEN {x \in m.locks : ~Decided(x[1])} ELSE {}
           Relock(k) == IF lock[n][k] = None /\ \E x \in Re : x[2] = k
                        THEN (CHOOSE x \in Re : x[2] = k)[1] ELSE lock[n][k]
           \* waiting transactions whose answer still counts
           Useful(t, ph) == <<t, ph>> \in m.wait /\ phase[t] = ph /\ n \notin acked[t]
           Refused == {t \in Txns : Useful(t, "execute") \/ Useful(t, "validate")}
           LogHere(t) == Pending(n, t)
           LogOk == {t \in Txns : Useful(t, "log") /\ (LogHere(t) \/ ~LogAgain)}
           LogLost == {t \in Txns : Useful(t, "log") /\ ~LogHere(t) /\ LogAgain}
           CommitNow == {t \in Txns : Useful(t, "commit") /\ LogHere(t)}
           CommitAck == {t \in Txns : Useful(t, "commit")}
           Unreported == {t \in Txns : Coord(t) = p /\ t \notin m.txs /\ Pending(n, t)}
           Freed == CommitNow \cup Unreported
       IN /\ lock' = [lock EXCEPT ![n] = [k \in Keys |->
                         IF Relock(k) \in Freed THEN None ELSE Relock(k)]]
          /\ relocked' = relocked \cup
                 {<<n, Relock(k)>> : k \in {j \in Keys : lock[n][j] = None /\ Relock(j) # None}}
          /\ rec' = [rec EXCEPT ![n] = @ \cup DecRecs(n, CommitNow, LAMBDA t : "COMMIT")
                                        \cup DecRecs(n, Unreported, LAMBDA t : "ABORT")]
          /\ val' = ApplyVals(n, CommitNow)
          /\ fin' = IF CommitNow \cup Unreported # {} THEN [fin EXCEPT ![n][p] = 1] ELSE fin
          /\ acked' = [t \in Txns |-> IF t \in Refused \cup LogOk \cup CommitAck
                                      THEN acked[t] \cup {n} ELSE acked[t]]
          /\ failed' = [t \in Txns |-> failed[t] \/ t \in Refused]
          \* log_again: the LOG goes to n again, after the report
          /\ msgs' = msgs \cup {Msg("LOG", t, p, n, epoch[p], TRUE, NoV) : t \in LogLost}
          /\ resent' = resent \cup LogLost
          /\ rbrec' = [rbrec EXCEPT ![n] = @ \cup m.recs]
          /\ rbw' = [rbw EXCEPT ![n] = @ \ {p}]
    /\ rmsgs' = rmsgs \ {m}
    /\ UNCHANGED <<alive, crashes, phase, dec, reported, obs, rtBefore,
                   epoch, cepoch, st, memb, rset, rval, decided, applied, rdec, rrec,
                   nrs, rbst, rbq, rebuilt>>

\* The commit-point rule over the records R ([h, r]) of t (decide.rs).
RebuildDecision(t, R) ==
    IF \E x \in R : x.r.kind = "ABORT" THEN "abort"
    ELSE IF \E x \in R : x.r.kind = "COMMIT" THEN "commit"
    ELSE IF \A k \in WS(t) : \A q \in Replicas(k) \cap alive :
                \E x \in R : x.h = q /\ k \in x.r.keys
         THEN "commit" ELSE "abort"

RebuildDone(n) ==
    /\ Rebuilding(n) /\ rbw[n] = {} /\ rbq[n] = {}
    /\ LET L == {t \in Txns : Coord(t) = n /\ phase[t] = "lost"}
           R(t) == {x \in rbrec[n] : x.r.t = t} \cup {[h |-> n, r |-> r] : r \in {x \in rec[n] : x.t = t}}
           D(t) == RebuildDecision(t, R(t))
           Holders(t) == {x.h : x \in R(t)} \ {n}
           Here == {t \in L : Pending(n, t)}
           Dm == {[kind |-> "DEC", dst |-> q, t |-> t, d |-> D(t)] : <<t, q>> \in
                    {<<u, q>> \in L \X Nodes : q \in Holders(u)}}
           Over == {t \in L : Holders(t) = {}}
       IN /\ dec' = [t \in Txns |-> IF t \in L THEN D(t) ELSE dec[t]]
          /\ rec' = [rec EXCEPT ![n] = @ \cup DecRecs(n, Here, LAMBDA t :
                                                 IF D(t) = "commit" THEN "COMMIT" ELSE "ABORT")]
          /\ val' = ApplyVals(n, {t \in Here : D(t) = "commit"})
          /\ rmsgs' = rmsgs \cup Dm
          /\ phase' = [t \in Txns |-> IF t \in Over THEN "done" ELSE phase[t]]
          /\ acked' = [t \in Txns |-> IF t \in Over THEN {} ELSE acked[t]]
          /\ rebuilt' = rebuilt \cup L
    /\ rbst' = [rbst EXCEPT ![n] = "serving"]
    /\ rbrec' = [rbrec EXCEPT ![n] = {}]
    /\ UNCHANGED <<alive, crashes, reported, obs, failed, lock, rtBefore, msgs, rvars,
                   nrs, rbq, rbw, relocked, resent>>

\* A peer applies the restarted node's decision for a transaction whose
\* LOG it holds (commit: COMMIT record, writes applied, locks released once
\* the host applied them, one step here; abort: ABORT record, locks released).
ApplyDec(m) ==
    /\ m \in rmsgs /\ m.kind = "DEC"
    /\ LET q == m.dst
           t == m.t
           here == Pending(q, t)
           last == ~\E o \in rmsgs \ {m} : o.kind = "DEC" /\ o.t = t
       IN /\ rec' = IF here THEN [rec EXCEPT ![q] = @ \cup DecRecs(q, {t}, LAMBDA u :
                                      IF m.d = "commit" THEN "COMMIT" ELSE "ABORT")]
                    ELSE rec
          /\ val' = IF here THEN ApplyVals(q, IF m.d = "commit" THEN {t} ELSE {}) ELSE val
          \* an abort also frees the locks an abort after LOG's first round left
          \* (main's apply_recovered: release_aborted_after_log)
          /\ lock' = IF here \/ m.d = "abort"
                     THEN [lock EXCEPT ![q] = [k \in Keys |-> IF @[k] = t THEN None ELSE @[k]]]
                     ELSE lock
          /\ phase' = IF last THEN [phase EXCEPT ![t] = "done"] ELSE phase
          /\ acked' = IF last THEN [acked EXCEPT ![t] = {}] ELSE acked
    /\ rmsgs' = rmsgs \ {m}
    /\ UNCHANGED <<alive, crashes, dec, reported, obs, failed, rtBefore, msgs, rvars,
                   nrs, rbst, rbq, rbw, rbrec, relocked, resent, rebuilt>>

\* A rebuilding node refuses EXECUTE and VALIDATE (Unavailable) from a peer
\* whose report is in.
Refuse(t, n) ==
    /\ RebuildGate /\ Rebuilding(n) /\ Coord(t) \notin rbw[n]
    /\ \E m \in Req(t, n, "EXEC") \cup Req(t, n, "VAL") :
          \E kind \in {"EXEC", "VAL"}, lost \in BOOLEAN :
             Handles(m, kind) /\ Answer(m, FALSE, NoV, lost)
    /\ UNCHANGED <<alive, crashes, phase, dec, reported, lock, val, rec, rtBefore, msgs,
                   rvars, xvars>>

-----------------------------------------------------------------------------
(* XenicOCCMsgs' actions, guarded for a rebuilding node *)

\* Nothing from p is handled at a rebuilding n before p's report is in.
Gate(t, n) == ~Rebuilding(n) \/ Coord(t) \notin rbw[n]
Serves(t, n) == ~Rebuilding(n) \/ (~RebuildGate /\ Gate(t, n))

StartR(t) == ~Rebuilding(Coord(t)) /\ Start(t)
CrashR(S) == ~AnyRebuild /\ Crash(S)

NextR ==
    \/ /\ \/ \E t \in Txns : StartR(t) \/ StepDone(t) \/ TimeoutAbort(t)
          \/ \E t \in Txns, n \in Nodes :
                \/ Serves(t, n) /\ (Execute(t, n) \/ Validate(t, n))
                \/ Gate(t, n) /\ (Log(t, n) \/ Commit(t, n) \/ Abort(t, n) \/ AbortLog(t, n))
          \/ \E n \in Nodes : DropOldAt(n)
          \/ \E S \in SUBSET Nodes : CrashR(S)
          \/ \E n \in Nodes : Bump(n) \/ Apply(n) \/ Resume(n)
          \/ Decide
          \/ Finished
       /\ UNCHANGED xvars
    \/ \E t \in Txns, n \in Nodes : Refuse(t, n)
    \/ \E n \in Nodes : NicRestart(n) \/ RebuildDone(n)
    \/ \E p, n \in Nodes : AnswerQuery(p, n)
    \/ \E m \in rmsgs : TakeReport(m) \/ ApplyDec(m)

SpecR == InitR /\ [][NextR]_varsR

-----------------------------------------------------------------------------
(* Correctness, with XenicOCCMsgs' StrictSerializableM, DecisionsPreserved, *)
(* NoOrphanLock and VersionsNeverDecrease                                   *)

\* A rebuilding node runs no transaction of its own, and every lock it
\* holds was given back by a report.
NoServiceWhileRebuilding ==
    \A n \in alive : Rebuilding(n) =>
        /\ \A t \in Txns : Coord(t) = n => phase[t] \in {"idle", "lost", "done"}
        /\ \A k \in Keys : lock[n][k] # None => <<n, lock[n][k]>> \in relocked

\* After a rebuild, every undecided transaction past Execute holds its
\* locks at each serving primary of the keys it writes (until that
\* primary recorded its COMMIT or ABORT).
LocksRebuilt ==
    ~Recovering =>
        \A t \in Txns : phase[t] \in {"validate", "log", "commit"} /\ CoordUp(t) =>
            \A k \in WS(t) :
                LET n == PrimaryIn(memb[Coord(t)], k) IN
                /\ n \in alive /\ ~Rebuilding(n)
                /\ ~HasRec(n, t, "COMMIT") /\ ~HasRec(n, t, "ABORT")
                => lock[n][k] = t

\* Every live replica of every key a committed transaction writes holds its
\* LOG or COMMIT record (a backup's host applies the write from its LOG
\* record: without it the replica never gets the value).
CommitPointHolds ==
    \A t \in Txns : dec[t] = "commit" =>
        \A k \in WS(t) : \A n \in Replicas(k) \cap alive :
            HasRec(n, t, "LOG") \/ HasRec(n, t, "COMMIT")

\* Non-vacuity targets.
NoRebuildCommit == ~\E t \in rebuilt : dec[t] = "commit"
NoRelockThenCommit == ~\E t \in Txns : reported[t] = "commit" /\ \E n \in Nodes : <<n, t>> \in relocked
NoLogAgainCommit == ~\E t \in resent : reported[t] = "commit"

=============================================================================
