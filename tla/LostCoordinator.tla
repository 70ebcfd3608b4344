--------------------------- MODULE LostCoordinator ---------------------------
(***************************************************************************)
(* A coordinator whose NIC runtime restarts while a transaction it         *)
(* coordinates is past its commit point, and a crash-recovery epoch that   *)
(* overtakes the restarted node's rebuild (the NIC restart; code:        *)
(* nic-runtime/src/recovery/epoch/decide.rs, the leader's rules and its          *)
(* "forgot" rule; protocol/server/orphans.rs recovery_evidence, what a     *)
(* replica reports; recovery/restart.rs, the rebuild; recovery/epoch/unresumed.rs *)
(* record_lost; RestartState::lost_commits).                               *)
(*                                                                         *)
(* One transaction T of coordinator C (always live: a whole-node crash is  *)
(* XenicOCCMsgs' case) writes one shard, replicated at Replicas; C is not  *)
(* a replica.  Messages travel in a bag (inflight) and may be reordered;   *)
(* the leader's recovery is one atomic step that drops every message in    *)
(* flight (packets of the old epoch are dropped).                          *)
(*                                                                         *)
(*   LOG to every replica; commit once every replica holds the LOG, then   *)
(*   COMMIT to every replica, "committed" reported to the client once      *)
(*   every replica recorded it; or abort, ABORT to every replica,          *)
(*   "aborted" reported once every replica recorded it.  The coordinator   *)
(*   lets T go once it reported.                                           *)
(*   NicRestart: C loses T (its client hears "unknown outcome"); any       *)
(*   subset of the messages in flight survives the crash.                  *)
(*   Learn(r): C's rebuild query reaches r, which reports its records of T *)
(*   to the rebuild and drops the packets of C's old incarnation.          *)
(*   RebuildDecide: every replica reported; C decides T by the commit-     *)
(*   point rule over the records (restart/decide.rs), sends the decision   *)
(*   to the replicas, and reports it as T's coordinator outcome in a       *)
(*   recovery until it resumes (record_lost).                              *)
(*   Recover: the leader decides T from the evidence:                      *)
(*     C's report: its decision if it holds T; once it lost T, the         *)
(*     rebuild's decision, or commit when a replica told the rebuild of a  *)
(*     COMMIT record (lost_commits); nothing otherwise.                    *)
(*     Each replica's report: its pending LOG record, and its COMMIT or    *)
(*     ABORT record as Report says: "all" (the code since this model), or  *)
(*     "known" (only once C's query reached it, the rule of 11acbd3), or   *)
(*     "failed" (only of failed coordinators' transactions: never here,    *)
(*     the rule before).                                                   *)
(*     Rule 1: C's decision.  "Forgot" (Forgot = TRUE): C live and silent, *)
(*     no decision record reported: abort.  Rule 2: a COMMIT record:       *)
(*     commit.  Rule 3: an ABORT record: abort.  Rule 4: every replica     *)
(*     holds the LOG pending: commit.  Rule 5: abort.  The replicas holding *)
(*     the LOG pending record the decision; C, if it holds T, reports it.  *)
(*                                                                         *)
(* Safety: the replicas never disagree (Agree), the client's answer is     *)
(* never contradicted (ReportStands), and after the recovery no replica    *)
(* holds T's LOG undecided (Decided).  Report = "known" and "failed" must  *)
(* violate Agree: C's COMMIT reached r1 only, C restarted, the epoch began *)
(* before C's query reached r1, and the leader, seeing C silent and no     *)
(* decision record, aborts T at r2 (the window 11acbd3 left open).         *)
(*                                                                         *)
(* Not modelled: a coordinator that lets an abort go before every replica  *)
(* recorded it (the coordinator's deadline rules at an epoch change), the  *)
(* only case the "forgot" rule is needed for; so Forgot = FALSE passes     *)
(* here too and says nothing.                                              *)
(***************************************************************************)
EXTENDS Naturals, FiniteSets

CONSTANTS
    Replicas,      \* the replicas of the shard T writes
    Report,        \* "all", "known" or "failed": whose decision records a replica reports
    Forgot,        \* BOOLEAN: the leader's "forgot" rule
    MaxRestarts    \* NIC restarts of C allowed

VARIABLES
    cph,       \* C's phase for T: "logging", "committing", "aborting",
               \* "released" (reported, let go), "lost" (NIC restart),
               \* "rebuilt" (the rebuild decided T)
    rec,       \* rec[r]: r's record of T: "none", "log", "commit", "abort"
    inflight,  \* messages in flight: <<kind, r>>, kind "log", "commit", "abort"
    reported,  \* what T's client heard: "none", "commit", "abort"
    restarts,  \* NIC restarts of C so far
    knows,     \* knows[r]: C's rebuild query reached r (r reported to it)
    lostDec,   \* the rebuild's decision: "none", "commit", "abort"
    recovered, \* the recovery epoch decided
    window     \* history: the recovery began with C's T lost, a LOG pending
               \* at one replica and a COMMIT record at one C's query had
               \* not reached

vars == <<cph, rec, inflight, reported, restarts, knows, lostDec, recovered, window>>

Decisions == {"commit", "abort"}

Init ==
    /\ cph = "logging"
    /\ rec = [r \in Replicas |-> "none"]
    /\ inflight = {<<"log", r>> : r \in Replicas}
    /\ reported = "none"
    /\ restarts = 0
    /\ knows = [r \in Replicas |-> FALSE]
    /\ lostDec = "none"
    /\ recovered = FALSE
    /\ window = FALSE

Frozen == recovered  \* after the recovery, nothing of T moves

DeliverLog(r) ==
    /\ ~Frozen
    /\ <<"log", r>> \in inflight
    /\ inflight' = inflight \ {<<"log", r>>}
    \* A LOG after T's ABORT here is refused (the per-slot fence).
    /\ rec' = IF rec[r] = "none" THEN [rec EXCEPT ![r] = "log"] ELSE rec
    /\ UNCHANGED <<cph, reported, restarts, knows, lostDec, recovered, window>>

\* A COMMIT or ABORT decision (C's or its rebuild's) reaches r.
DeliverDecision(r, d) ==
    /\ ~Frozen
    /\ <<d, r>> \in inflight
    /\ inflight' = inflight \ {<<d, r>>}
    /\ rec' = CASE d = "commit" /\ rec[r] = "log" -> [rec EXCEPT ![r] = "commit"]
                [] d = "abort" /\ rec[r] \in {"none", "log"} -> [rec EXCEPT ![r] = "abort"]
                [] OTHER -> rec
    /\ UNCHANGED <<cph, reported, restarts, knows, lostDec, recovered, window>>

DecideCommit ==
    /\ ~Frozen
    /\ cph = "logging"
    /\ \A r \in Replicas : rec[r] = "log"
    /\ cph' = "committing"
    /\ inflight' = inflight \cup {<<"commit", r>> : r \in Replicas}
    /\ UNCHANGED <<rec, reported, restarts, knows, lostDec, recovered, window>>

DecideAbort ==
    /\ ~Frozen
    /\ cph = "logging"
    /\ cph' = "aborting"
    /\ inflight' = inflight \cup {<<"abort", r>> : r \in Replicas}
    /\ UNCHANGED <<rec, reported, restarts, knows, lostDec, recovered, window>>

Finish ==
    /\ ~Frozen
    /\ \/ cph = "committing" /\ \A r \in Replicas : rec[r] = "commit"
          /\ reported' = "commit"
       \/ cph = "aborting" /\ \A r \in Replicas : rec[r] = "abort"
          /\ reported' = "abort"
    /\ cph' = "released"
    /\ UNCHANGED <<rec, inflight, restarts, knows, lostDec, recovered, window>>

NicRestart ==
    /\ ~Frozen
    /\ restarts < MaxRestarts
    /\ restarts' = restarts + 1
    /\ cph' = IF cph = "released" THEN cph ELSE "lost"
    /\ inflight' \in SUBSET inflight
    /\ UNCHANGED <<rec, reported, knows, lostDec, recovered, window>>

\* The query's new incarnation resets r's session with C: the old
\* incarnation's packets still in flight to r are dropped.
Learn(r) ==
    /\ ~Frozen
    /\ restarts > 0
    /\ ~knows[r]
    /\ knows' = [knows EXCEPT ![r] = TRUE]
    /\ inflight' = {m \in inflight : m[2] # r}
    /\ UNCHANGED <<cph, rec, reported, restarts, lostDec, recovered, window>>

\* The commit-point rule over the replicas' records (rules 2-5).
ByRecords(commitRec, abortRec, allLogged) ==
    IF commitRec THEN "commit"
    ELSE IF abortRec THEN "abort"
    ELSE IF allLogged THEN "commit"
    ELSE "abort"

RebuildDecide ==
    /\ ~Frozen
    /\ cph = "lost"
    /\ \A r \in Replicas : knows[r]
    /\ LET d == ByRecords(\E r \in Replicas : rec[r] = "commit",
                          \E r \in Replicas : rec[r] = "abort",
                          \A r \in Replicas : rec[r] \in {"log", "commit"})
       IN  /\ lostDec' = d
           /\ inflight' = inflight \cup {<<d, r>> : r \in Replicas}
    /\ cph' = "rebuilt"
    /\ UNCHANGED <<rec, reported, restarts, knows, recovered, window>>

\* What C reports of T to the recovery leader.
CoordReport ==
    CASE cph = "committing" -> "commit"
      [] cph = "aborting" -> "abort"
      [] cph = "logging" -> "undecided"
      [] cph = "rebuilt" -> lostDec
      [] cph = "lost" /\ \E r \in Replicas : knows[r] /\ rec[r] = "commit" -> "commit"
      [] OTHER -> "none"

\* Whether r reports its decision record of T.
ReportsDecision(r) ==
    /\ rec[r] \in Decisions
    /\ \/ Report = "all"
       \/ Report = "known" /\ knows[r]

LeaderDecision ==
    LET c == CoordReport
        commitRec == \E r \in Replicas : ReportsDecision(r) /\ rec[r] = "commit"
        abortRec == \E r \in Replicas : ReportsDecision(r) /\ rec[r] = "abort"
    IN  IF c \in Decisions THEN c
        ELSE IF Forgot /\ c = "none" /\ ~commitRec /\ ~abortRec THEN "abort"
        ELSE ByRecords(commitRec, abortRec,
                       \A r \in Replicas : rec[r] = "log"
                                           \/ (ReportsDecision(r) /\ rec[r] = "commit"))

Recover ==
    /\ ~recovered
    /\ recovered' = TRUE
    /\ inflight' = {}
    /\ window' = /\ cph = "lost"
                 /\ \E r \in Replicas : rec[r] = "log"
                 /\ \E r \in Replicas : rec[r] = "commit" /\ ~knows[r]
    /\ LET inEvidence == CoordReport \notin {"none"}
                         \/ \E r \in Replicas : rec[r] = "log" \/ ReportsDecision(r)
           d == LeaderDecision
       IN  IF inEvidence
           THEN /\ rec' = [r \in Replicas |-> IF rec[r] = "log" THEN d ELSE rec[r]]
                /\ IF cph \in {"logging", "committing", "aborting"}
                   THEN /\ reported' = d
                        /\ cph' = "released"
                   ELSE UNCHANGED <<reported, cph>>
           ELSE UNCHANGED <<rec, reported, cph>>
    /\ UNCHANGED <<restarts, knows, lostDec>>

\* Nothing of T moves once the recovery decided it, or once T is finished
\* without one (no deadlock).
Finished ==
    /\ recovered \/ (cph = "released" /\ inflight = {})
    /\ UNCHANGED vars

Next ==
    \/ \E r \in Replicas : DeliverLog(r) \/ Learn(r)
    \/ \E r \in Replicas, d \in Decisions : DeliverDecision(r, d)
    \/ DecideCommit \/ DecideAbort \/ Finish
    \/ NicRestart \/ RebuildDecide \/ Recover
    \/ Finished

Spec == Init /\ [][Next]_vars

TypeOK ==
    /\ cph \in {"logging", "committing", "aborting", "released", "lost", "rebuilt"}
    /\ rec \in [Replicas -> {"none", "log", "commit", "abort"}]
    /\ inflight \subseteq ({"log"} \cup Decisions) \X Replicas
    /\ reported \in {"none"} \cup Decisions
    /\ restarts \in 0..MaxRestarts
    /\ knows \in [Replicas -> BOOLEAN]
    /\ lostDec \in {"none"} \cup Decisions
    /\ recovered \in BOOLEAN
    /\ window \in BOOLEAN

\* The replicas never disagree on T.
Agree == ~(\E r1, r2 \in Replicas : rec[r1] = "commit" /\ rec[r2] = "abort")

\* What T's client heard is what every replica recorded or will record.
ReportStands ==
    /\ reported = "commit" => \A r \in Replicas : rec[r] # "abort"
    /\ reported = "abort" => \A r \in Replicas : rec[r] # "commit"

\* After the recovery no replica holds T's LOG undecided.
Decided == recovered => \A r \in Replicas : rec[r] # "log"

\* Non-vacuity: C restarted after its COMMIT reached one replica only, the
\* recovery began before C's query reached that replica, and it committed T
\* everywhere (must be violated with Report = "all").
WindowNeverCommitted == ~(window /\ \A r \in Replicas : rec[r] = "commit")
=============================================================================
