----------------------------- MODULE Rereplicate -----------------------------
(***************************************************************************)
(* Re-replication: after a crash, a shard that lost a replica            *)
(* gets a new backup, brought up to date while writes keep committing,     *)
(* from a snapshot of the primary plus the log records that arrive during  *)
(* the copy; only then does it count as a replica.  Then a later crash     *)
(* (within f) loses no committed write.                                    *)
(*                                                                         *)
(* Abstraction.  XenicOCCMsgs checks the commit protocol and its stepwise  *)
(* recovery; this module abstracts both to what re-replication depends    *)
(* on.  A shard is one key whose value is its version (0 at start).  Its   *)
(* primary (the first of repl[s]) serialises writes: one write in flight   *)
(* per shard, version = the primary's version + 1.  A write's record goes  *)
(* to every replica of the shard and, with Forward, to the backup being    *)
(* copied (Xenic's LOG to every replica); a replica applies it when it     *)
(* arrives (Deliver); the write commits once every live destination        *)
(* acknowledged (the commit point).  A crash and its recovery are one      *)
(* step: repl[s] loses the crashed nodes (the first surviving backup is    *)
(* promoted); a write whose primary crashed is committed iff a surviving   *)
(* replica holds its record (one key, no validation: the newest surviving  *)
(* record wins), and every surviving replica takes that newest value; a    *)
(* copy in progress is abandoned (recovery starts it again, from scratch:  *)
(* an acknowledgement of the abandoned copy no longer counts; without      *)
(* this TLC finds a write counted on a restarted backup that lost it).     *)
(*                                                                         *)
(* The copy, concurrent with writes:                                       *)
(*   JoinStart(s, b)  a live node b that is no replica of s becomes s's    *)
(*                    joining backup: from now on every new write of s     *)
(*                    also sends its record to b (if Forward) and waits   *)
(*                    for b's acknowledgement;                             *)
(*   Snapshot(s)      the primary's state is copied; with SnapshotWaits   *)
(*                    only once every write not sent to b is applied at    *)
(*                    the primary (the snapshot covers the log up to the   *)
(*                    join point);                                         *)
(*   CatchUp(s)       b installs the snapshot under the records it        *)
(*                    already applied (newest wins) and joins repl[s] as   *)
(*                    its last backup.                                     *)
(*                                                                         *)
(* Checked: ReplicasCaughtUp (every live replica of a shard holds its last *)
(* committed write; a joining backup is a replica only after CatchUp),    *)
(* NoLostCommit (some live replica holds it: a later crash within f lost   *)
(* nothing), VersionsNeverDecrease (a property).                           *)
(*                                                                         *)
(* Models: 4 nodes, shards s1 (n1, n2) and s2 (n2, n3), n4 spare;          *)
(* replication degree 2 (f = 1, one node per crash), two writes per shard, *)
(* two crashes.  Rereplicate.cfg must pass; RereplicateNoForward.cfg       *)
(* (records of the copy's writes not sent to the new backup) and           *)
(* RereplicateEarlySnapshot.cfg (snapshot before a write started before    *)
(* the join reached the primary) must violate ReplicasCaughtUp;            *)
(* RereplicateNoForward_lost.cfg checks only NoLostCommit and must violate *)
(* it (the old primary crashes after the catch-up); Rereplicate_nonvacuous *)
(* must violate NoCopiedWriteSurvives.                                     *)
(*                                                                         *)
(* A crashed node may restart (Restarts), empty, and then join like a new  *)
(* one (Rereplicate_writes; Rereplicate_rejoin must violate NoRejoin).     *)
(*                                                                         *)
(* Not modelled: several keys per shard, transactions over several        *)
(* shards, the snapshot's transfer in chunks (one step), membership        *)
(* (etcd), NIC-runtime-only crashes.                                       *)
(***************************************************************************)
EXTENDS Naturals, Sequences, FiniteSets

CONSTANTS
    Nodes,          \* machines
    Shards,         \* shards, one key each
    Home,           \* [Shards -> Seq(Nodes)]: initial replicas, primary first
    MaxWrites,      \* writes started per shard
    MaxCrashes,     \* crash events
    Forward,        \* BOOLEAN: writes during the copy also go to the new backup
    SnapshotWaits,  \* BOOLEAN: the snapshot waits for writes not sent to it
    Restarts        \* BOOLEAN: crashed nodes may restart (empty) and rejoin

\* The models' placement: s1 on n1 (primary), n2; s2 on n2, n3; n4 spare.
RingHome4 == [s1 |-> <<"n1", "n2">>, s2 |-> <<"n2", "n3">>]

None == "none"
Range(q) == {q[i] : i \in 1..Len(q)}
Degree(s) == Len(Home[s])
Max(a, b) == IF a >= b THEN a ELSE b

ASSUME \A s \in Shards : Degree(s) >= 2 /\ Range(Home[s]) \subseteq Nodes

VARIABLES
    alive,      \* live nodes
    crashes,    \* crash events so far
    repl,       \* [Shards -> Seq(Nodes)]: caught-up replicas, primary first
    store,      \* [Nodes -> [Shards -> Nat]]: version applied at each node
    committed,  \* [Shards -> Nat]: newest committed version
    wv,         \* [Shards -> Nat]: version of the write in flight (0: none)
    sent,       \* [Shards -> SUBSET Nodes]: where that write's record went
    wacked,     \* [Shards -> SUBSET Nodes]: which of them applied it
    writes,     \* [Shards -> Nat]: writes started
    join,       \* [Shards -> Nodes \cup {None}]: the backup being copied
    snap        \* [Shards -> SUBSET Nat]: the snapshot taken for it ({}: none yet)

vars == <<alive, crashes, repl, store, committed, wv, sent, wacked, writes, join, snap>>

Primary(s) == Head(repl[s])

Init ==
    /\ alive = Nodes
    /\ crashes = 0
    /\ repl = Home
    /\ store = [n \in Nodes |-> [s \in Shards |-> 0]]
    /\ committed = [s \in Shards |-> 0]
    /\ wv = [s \in Shards |-> 0]
    /\ sent = [s \in Shards |-> {}]
    /\ wacked = [s \in Shards |-> {}]
    /\ writes = [s \in Shards |-> 0]
    /\ join = [s \in Shards |-> None]
    /\ snap = [s \in Shards |-> {}]

TypeOK ==
    /\ alive \subseteq Nodes
    /\ crashes \in 0..MaxCrashes
    /\ \A s \in Shards : Range(repl[s]) \subseteq alive /\ repl[s] # <<>>
    /\ store \in [Nodes -> [Shards -> Nat]]
    /\ committed \in [Shards -> Nat]
    /\ join \in [Shards -> Nodes \cup {None}]

-----------------------------------------------------------------------------
(* Writes *)

WriteStart(s) ==
    /\ wv[s] = 0 /\ writes[s] < MaxWrites
    /\ LET B == IF Forward /\ join[s] # None THEN {join[s]} ELSE {} IN
       /\ wv' = [wv EXCEPT ![s] = store[Primary(s)][s] + 1]
       /\ sent' = [sent EXCEPT ![s] = Range(repl[s]) \cup B]
       /\ wacked' = [wacked EXCEPT ![s] = {}]
    /\ writes' = [writes EXCEPT ![s] = @ + 1]
    /\ UNCHANGED <<alive, crashes, repl, store, committed, join, snap>>

Deliver(s, n) ==
    /\ wv[s] # 0 /\ n \in (sent[s] \cap alive) \ wacked[s]
    /\ store' = [store EXCEPT ![n][s] = Max(@, wv[s])]
    /\ wacked' = [wacked EXCEPT ![s] = @ \cup {n}]
    /\ UNCHANGED <<alive, crashes, repl, committed, wv, sent, writes, join, snap>>

\* The commit point: every live destination applied the record.
WriteDone(s) ==
    /\ wv[s] # 0 /\ sent[s] \cap alive \subseteq wacked[s]
    /\ committed' = [committed EXCEPT ![s] = wv[s]]
    /\ wv' = [wv EXCEPT ![s] = 0]
    /\ UNCHANGED <<alive, crashes, repl, store, sent, wacked, writes, join, snap>>

-----------------------------------------------------------------------------
(* The copy *)

JoinStart(s, b) ==
    /\ join[s] = None /\ Len(repl[s]) < Degree(s)
    /\ b \in alive \ Range(repl[s])
    /\ join' = [join EXCEPT ![s] = b]
    /\ snap' = [snap EXCEPT ![s] = {}]
    /\ store' = [store EXCEPT ![b][s] = 0]     \* starts empty
    /\ UNCHANGED <<alive, crashes, repl, committed, wv, sent, wacked, writes>>

\* Every write whose record does not go to the new backup is in the
\* primary's state (so in the snapshot).
SnapshotCovers(s) == wv[s] = 0 \/ join[s] \in sent[s] \/ Primary(s) \in wacked[s]

Snapshot(s) ==
    /\ join[s] # None /\ snap[s] = {}
    /\ SnapshotWaits => SnapshotCovers(s)
    /\ snap' = [snap EXCEPT ![s] = {store[Primary(s)][s]}]
    /\ UNCHANGED <<alive, crashes, repl, store, committed, wv, sent, wacked, writes, join>>

CatchUp(s) ==
    /\ join[s] # None /\ snap[s] # {}
    /\ LET b == join[s]
           v == CHOOSE x \in snap[s] : TRUE
       IN /\ store' = [store EXCEPT ![b][s] = Max(@, v)]
          /\ repl' = [repl EXCEPT ![s] = Append(@, b)]
    /\ join' = [join EXCEPT ![s] = None]
    /\ snap' = [snap EXCEPT ![s] = {}]
    /\ UNCHANGED <<alive, crashes, committed, wv, sent, wacked, writes>>

-----------------------------------------------------------------------------
(* Crash and recovery (one step) *)

CrashOK(S) ==
    /\ crashes < MaxCrashes
    /\ S # {} /\ S \subseteq alive
    /\ \A s \in Shards : Cardinality(S \cap Range(repl[s])) < Degree(s)
    /\ \A s \in Shards : Range(repl[s]) \ S # {}

Crash(S) ==
    /\ CrashOK(S)
    /\ LET A == alive \ S
           R(s) == SelectSeq(repl[s], LAMBDA n : n \notin S)
           \* the write in flight lost its primary: recovery decides it
           Lost(s) == wv[s] # 0 /\ Primary(s) \in S
           Top(s) == LET V == {store[n][s] : n \in Range(R(s))}
                     IN CHOOSE x \in V : \A y \in V : y <= x
       IN /\ alive' = A
          /\ repl' = [s \in Shards |-> R(s)]
          /\ store' = [n \in Nodes |-> [s \in Shards |->
                          IF Lost(s) /\ n \in Range(R(s)) THEN Top(s) ELSE store[n][s]]]
          /\ committed' = [s \in Shards |-> IF Lost(s) THEN Max(committed[s], Top(s))
                                            ELSE committed[s]]
          /\ wv' = [s \in Shards |-> IF Lost(s) THEN 0 ELSE wv[s]]
    /\ crashes' = crashes + 1
    \* copies start again from scratch: the abandoned joiner is no longer a
    \* destination of the write in flight (its acknowledgement is void)
    /\ join' = [s \in Shards |-> None]
    /\ snap' = [s \in Shards |-> {}]
    \* (records to crashed nodes are lost with them)
    /\ sent' = [s \in Shards |-> sent[s] \ ({join[s]} \cup S)]
    /\ wacked' = [s \in Shards |-> wacked[s] \ ({join[s]} \cup S)]
    /\ UNCHANGED writes

\* A crashed node restarts (Restarts): its memory is gone, it is a replica
\* of nothing and may be chosen as a new backup like any spare.
Restart(n) ==
    /\ Restarts /\ n \in Nodes \ alive
    /\ alive' = alive \cup {n}
    /\ store' = [store EXCEPT ![n] = [s \in Shards |-> 0]]
    /\ UNCHANGED <<crashes, repl, committed, wv, sent, wacked, writes, join, snap>>

-----------------------------------------------------------------------------

Finished ==
    /\ \A s \in Shards : wv[s] = 0 /\ join[s] = None
    /\ UNCHANGED vars

Next ==
    \/ \E s \in Shards : WriteStart(s) \/ WriteDone(s) \/ Snapshot(s) \/ CatchUp(s)
    \/ \E s \in Shards, n \in Nodes : Deliver(s, n) \/ JoinStart(s, n)
    \/ \E S \in SUBSET Nodes : Crash(S)
    \/ \E n \in Nodes : Restart(n)
    \/ Finished

Spec == Init /\ [][Next]_vars

-----------------------------------------------------------------------------
(* Correctness *)

\* Every live replica of a shard (the backups that caught up included)
\* holds the shard's last committed write.
ReplicasCaughtUp ==
    \A s \in Shards : \A n \in Range(repl[s]) : store[n][s] >= committed[s]

\* Some live replica holds it: no committed write was lost by a crash.
NoLostCommit ==
    \A s \in Shards : \E n \in Range(repl[s]) : store[n][s] >= committed[s]

\* Checked as a PROPERTY: a replica's version never decreases.
VersionsNeverDecrease ==
    [][\A s \in Shards : \A n \in Range(repl[s]) \cap Range(repl'[s]) :
         store[n][s] <= store'[n][s]]_vars

\* Non-vacuity target: violated once a shard's committed data lives only on
\* backups added by re-replication (both original replicas crashed).
NoCopiedWriteSurvives ==
    ~\E s \in Shards : committed[s] > 0 /\ Range(repl[s]) \cap Range(Home[s]) = {}

\* Non-vacuity target: violated once a crashed node restarted and rejoined
\* its shard as a backup (behind the promoted one).
NoRejoin ==
    ~\E s \in Shards : Len(repl[s]) >= 2 /\ repl[s][2] = Home[s][1]

=============================================================================
