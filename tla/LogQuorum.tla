------------------------------ MODULE LogQuorum ------------------------------
(***************************************************************************)
(* Whom crash recovery's rule 4 asks for the LOG when replicas change      *)
(* (re-replication and rejoin; code:                                      *)
(* nic-runtime/src/recovery/epoch/decide.rs, LogQuorum and                *)
(* TxEvidence::decide_tx_caught_up; PlacementView::renewed and joining).   *)
(*                                                                         *)
(* One shard, replicated at the caught-up members (initially InitMembers). *)
(* Reconfigurations, each an epoch that resumes at once (no transaction   *)
(* is undecided in between: T runs only after them or is decided by the   *)
(* recovery first):                                                        *)
(*   Crash(n)     a member crashes and is configured out (at most MaxFaults *)
(*                crashes and restarts of members);                        *)
(*   Join(n)      a live non-member is chosen as a new backup (joining,    *)
(*                copied);                                                 *)
(*   CatchUp(n)   its copy is done: it reports caught up and, in an epoch  *)
(*                that resumes, becomes a member; every live node resumes  *)
(*                with that view;                                          *)
(*   Restart(n)   a live node's process restarts empty (renewed: its LOG   *)
(*                records are gone; a member stays in the view, renewed,   *)
(*                until it catches up again; the new process knows only    *)
(*                the first configuration as its last resumed view).       *)
(* One transaction T of an outside coordinator sends its LOG to the        *)
(* members of the view it runs in; once every one of them holds it, it may *)
(* send COMMIT; the coordinator crashes at any time, and Recover (once)    *)
(* decides T at a live leader by the rules: a COMMIT record (reported by   *)
(* every replica holding one) commits; otherwise rule 4: every node of the *)
(* quorum holds the LOG (and the quorum is not empty) commits; otherwise   *)
(* abort. The quorum is, by Quorum:                                        *)
(*   "caughtup"    the live members that are neither joining nor renewed   *)
(*                 (LogQuorum::CaughtUpMembers, the code);                 *)
(*   "leaderview"  the live nodes of the view the leader last resumed in   *)
(*                 (the rule before 7d37d94): a restarted leader's is the  *)
(*                 first configuration's, so it need not ask a member that *)
(*                 caught up since, and commits a write that member never  *)
(*                 logged (rejoin Smallbank seed 282 of 5 nodes);          *)
(*   "every"       every live member, joining and renewed ones too         *)
(*                 (LogQuorum::EveryMember, a NIC restart's rule).         *)
(*                                                                         *)
(* Safety: after the recovery, every live caught-up member holds T's       *)
(* decision as every other does: none lacks a committed write              *)
(* (NoMissingWrite; a joining or renewed node gets the write from the next *)
(* copy, which starts after the recovery), and no client's commit is       *)
(* contradicted (ReportStands).  "leaderview" must violate NoMissingWrite. *)
(* "every" passes: since every replica reports its decision records, a     *)
(* reported commit is decided by its COMMIT records, and asking a node     *)
(* that never had the LOG only aborts more.                                *)
(***************************************************************************)
EXTENDS Naturals, FiniteSets

CONSTANTS
    Nodes,         \* every node
    InitMembers,   \* the shard's first replicas
    Quorum,        \* "caughtup", "leaderview" or "every"
    MaxFaults,     \* crashes and restarts of members
    MaxRestarts    \* restarts of any node

VARIABLES
    live,        \* live processes
    members,     \* the shard's replicas in the current view
    joining,     \* members still being copied
    renewed,     \* members restarted since they last caught up
    resumedView, \* resumedView[n]: members of the view n last resumed in
    rec,         \* rec[n]: "none", "log", "commit", "abort"
    tview,       \* members T sent its LOG to ({} before it runs)
    inflight,    \* messages in flight: <<kind, n>>
    cph,         \* coordinator: "idle", "logging", "committing", "done", "crashed"
    reported,    \* what T's client heard: "none", "commit"
    faults,      \* crashes and restarts of members so far
    restarts,    \* restarts so far
    decided,     \* the recovery's decision: "none", "commit", "abort"
    byRule4New   \* history: rule 4 committed T with no COMMIT record, asking a
                 \* member that was not in the first configuration

vars == <<live, members, joining, renewed, resumedView, rec, tview, inflight,
          cph, reported, faults, restarts, decided, byRule4New>>

CaughtUp == (members \cap live) \ (joining \cup renewed)

\* No transaction undecided: before T runs, or once it is decided.
Quiet == tview = {} \/ decided # "none" \/ cph = "done"

Init ==
    /\ live = Nodes
    /\ members = InitMembers
    /\ joining = {}
    /\ renewed = {}
    /\ resumedView = [n \in Nodes |-> InitMembers]
    /\ rec = [n \in Nodes |-> "none"]
    /\ tview = {}
    /\ inflight = {}
    /\ cph = "idle"
    /\ reported = "none"
    /\ faults = 0
    /\ restarts = 0
    /\ decided = "none"
    /\ byRule4New = FALSE

\* An epoch that resumes: every live node's last resumed view is this one.
Resumed(m) == [n \in Nodes |-> IF n \in live THEN m ELSE resumedView[n]]

Crash(n) ==
    /\ Quiet \/ (cph = "crashed" /\ decided = "none")
    /\ n \in live /\ n \in members /\ faults < MaxFaults
    /\ Cardinality(CaughtUp \ {n}) >= 1
    /\ live' = live \ {n}
    /\ members' = members \ {n}
    /\ joining' = joining \ {n}
    /\ renewed' = renewed \ {n}
    /\ faults' = faults + 1
    /\ resumedView' = [m \in Nodes |-> IF m \in live' THEN members' ELSE resumedView[m]]
    /\ UNCHANGED <<rec, tview, inflight, cph, reported, restarts, decided, byRule4New>>

Join(n) ==
    /\ Quiet
    /\ n \in live /\ n \notin members
    /\ members' = members \cup {n}
    /\ joining' = joining \cup {n}
    /\ resumedView' = Resumed(members')
    /\ UNCHANGED <<live, renewed, rec, tview, inflight, cph, reported, faults, restarts, decided, byRule4New>>

\* The copy is taken from a caught-up member after every earlier
\* transaction was decided there: it carries T's decided write, if any.
CatchUp(n) ==
    /\ Quiet
    /\ n \in joining \cup renewed
    /\ n \in live
    /\ joining' = joining \ {n}
    /\ renewed' = renewed \ {n}
    /\ rec' = [rec EXCEPT ![n] = IF decided = "commit" \/ reported = "commit"
                                 THEN "commit" ELSE "none"]
    /\ resumedView' = Resumed(members)
    /\ UNCHANGED <<live, members, tview, inflight, cph, reported, faults, restarts, decided, byRule4New>>

Restart(n) ==
    /\ Quiet
    /\ n \in live /\ restarts < MaxRestarts
    /\ n \in members => faults < MaxFaults
    /\ n \in members => Cardinality(CaughtUp \ {n}) >= 1
    /\ restarts' = restarts + 1
    /\ faults' = IF n \in members THEN faults + 1 ELSE faults
    /\ rec' = [rec EXCEPT ![n] = "none"]
    /\ renewed' = IF n \in members THEN renewed \cup {n} ELSE renewed
    /\ resumedView' = [resumedView EXCEPT ![n] = InitMembers]
    /\ UNCHANGED <<live, members, joining, tview, inflight, cph, reported, decided, byRule4New>>

RunTx ==
    /\ cph = "idle"
    /\ cph' = "logging"
    /\ tview' = members \cap live
    /\ inflight' = {<<"log", n>> : n \in members \cap live}
    /\ UNCHANGED <<live, members, joining, renewed, resumedView, rec, reported,
                   faults, restarts, decided, byRule4New>>

Deliver(n, kind) ==
    /\ decided = "none"
    /\ <<kind, n>> \in inflight
    /\ inflight' = inflight \ {<<kind, n>>}
    /\ LET takes == \/ kind = "log" /\ rec[n] = "none"
                    \/ kind = "commit" /\ rec[n] = "log"
       IN  rec' = IF n \in live /\ takes THEN [rec EXCEPT ![n] = kind] ELSE rec
    /\ UNCHANGED <<live, members, joining, renewed, resumedView, tview, cph,
                   reported, faults, restarts, decided, byRule4New>>

DecideCommit ==
    /\ cph = "logging"
    /\ \A n \in tview : rec[n] = "log"
    /\ cph' = "committing"
    /\ inflight' = inflight \cup {<<"commit", n>> : n \in tview}
    /\ UNCHANGED <<live, members, joining, renewed, resumedView, rec, tview,
                   reported, faults, restarts, decided, byRule4New>>

Finish ==
    /\ cph = "committing"
    /\ \A n \in tview : rec[n] = "commit"
    /\ cph' = "done"
    /\ reported' = "commit"
    /\ UNCHANGED <<live, members, joining, renewed, resumedView, rec, tview,
                   inflight, faults, restarts, decided, byRule4New>>

CoordCrash ==
    /\ cph \in {"logging", "committing"}
    /\ cph' = "crashed"
    /\ inflight' \in SUBSET inflight
    /\ UNCHANGED <<live, members, joining, renewed, resumedView, rec, tview,
                   reported, faults, restarts, decided, byRule4New>>

QuorumOf(leader) ==
    CASE Quorum = "caughtup" -> CaughtUp
      [] Quorum = "leaderview" -> resumedView[leader] \cap live
      [] Quorum = "every" -> members \cap live

Recover ==
    /\ cph = "crashed" /\ decided = "none"
    /\ \E leader \in live :
         LET q == QuorumOf(leader)
             d == IF \E n \in live : rec[n] = "commit" THEN "commit"
                  ELSE IF q # {} /\ \A n \in q : rec[n] \in {"log", "commit"}
                  THEN "commit" ELSE "abort"
         IN  /\ decided' = d
             /\ rec' = [n \in Nodes |-> IF n \in live /\ rec[n] = "log" THEN d ELSE rec[n]]
             /\ byRule4New' = (d = "commit" /\ ~\E n \in live : rec[n] = "commit"
                               /\ q \ InitMembers # {})
    /\ inflight' = {}
    /\ resumedView' = Resumed(members)
    /\ UNCHANGED <<live, members, joining, renewed, tview, cph, reported, faults, restarts>>

Finished ==
    /\ (cph = "done" /\ inflight = {}) \/ decided # "none"
    /\ UNCHANGED vars

Next ==
    \/ \E n \in Nodes : Crash(n) \/ Join(n) \/ CatchUp(n) \/ Restart(n)
    \/ \E n \in Nodes, k \in {"log", "commit"} : Deliver(n, k)
    \/ RunTx \/ DecideCommit \/ Finish \/ CoordCrash \/ Recover
    \/ Finished

Spec == Init /\ [][Next]_vars

TypeOK ==
    /\ live \subseteq Nodes /\ members \subseteq Nodes
    /\ joining \subseteq members /\ renewed \subseteq members
    /\ rec \in [Nodes -> {"none", "log", "commit", "abort"}]
    /\ cph \in {"idle", "logging", "committing", "done", "crashed"}
    /\ decided \in {"none", "commit", "abort"}

\* After the recovery committed T, every live caught-up member holds it.
NoMissingWrite ==
    decided = "commit" => \A n \in CaughtUp : rec[n] = "commit"

\* A commit the client heard is what the recovery decides.
ReportStands == reported = "commit" => decided # "abort"

\* Non-vacuity: rule 4 commits T, with no COMMIT record, asking a member
\* that caught up after the first configuration (must be violated with
\* "caughtup").
NoRule4CommitAtANewMember == ~byRule4New
=============================================================================
