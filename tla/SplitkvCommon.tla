--------------------------- MODULE SplitkvCommon ---------------------------
(***************************************************************************)
(* Definitions shared by every splitkv commit-protocol spec (XenicOCC,     *)
(* DnlSkeleton and the per-protocol models built on it):                   *)
(*                                                                         *)
(*   - the cluster: nodes, keys, static placement (primary + backups),     *)
(*     and placement after a crash (a live backup is promoted);            *)
(*   - the workload: a fixed set of transactions, each with a coordinator, *)
(*     a read set and a write set, or a single-key GetOne;                 *)
(*   - the variables every protocol has (node stores, locks, per-node      *)
(*     logs, coordinator state, history variables);                        *)
(*   - the correctness conditions: strict serializability of the           *)
(*     committed transactions (recovery commits included) and              *)
(*     preservation of every decision reported to a client.                *)
(*                                                                         *)
(* Code: the placement mirrors "key hash -> shard -> primary and f         *)
(* backups" (DESIGN.md, Data and metadata); the history checks play the    *)
(* role of the sim's history checkers (sim/), on a much smaller scale.     *)
(*                                                                         *)
(* Values and versions.  A value is the identifier of the transaction      *)
(* that wrote it (or Init0), so it doubles as a version tag: every write   *)
(* is unique, which is all an equality-based version check needs.  The     *)
(* integer version the code increments is recovered as Pos(k, x): the      *)
(* length of the chain of writes ending in x.  For that, every written     *)
(* key must also be read (read-modify-write); see WorkloadOK.              *)
(***************************************************************************)
EXTENDS Naturals, FiniteSets, Sequences

CONSTANTS
    Nodes,       \* machines; each runs a coordinator and a server role
    Keys,        \* keys; one shard per key
    Txns,        \* transaction identifiers (multi-key transactions and GetOnes)
    Primary,     \* [Keys -> Nodes]: primary replica of each key
    Backups,     \* [Keys -> SUBSET Nodes]: backup replicas of each key
    Tx,          \* [Txns -> [c: Nodes, r: SUBSET Keys, w: SUBSET Keys, one: BOOLEAN]]
    MaxCrashes   \* how many crash events (each followed by recovery) may happen

(***************************************************************************)
(* Small models.  Every config uses three nodes in a ring with replication *)
(* degree 2 (key ki: primary ni, backup n(i+1)) and keys k1, k2; so n1 is  *)
(* only a primary, n3 only a backup, and the crashes that keep a replica   *)
(* of every key are {n1}, {n2}, {n3} and {n1, n3}.                         *)
(*                                                                         *)
(* Workloads:                                                              *)
(*   t1, t2 (all but DnlRO): a write-skew pair.  Both read k1 and k2; t1   *)
(*     writes k1, t2 writes k2.  Coordinator n2 is k1's backup and k2's    *)
(*     primary; n3 is not a replica of k1 and is k2's backup.  So each     *)
(*     coordinator is the backup of the key it writes, and reads are local *)
(*     from a backup, local from a primary, and remote.                    *)
(*   SkewGetOneTx adds t3: GetOne of k1 at n2, k1's backup (READABLE).     *)
(*   SkewReadOnlyTx adds t3: read-only k1, k2 at n1 (Dnl-RO / Xenic RO).   *)
(*   ReadOnlyTx: t1 (at n1) writes k1 and k2; t2 (at n3) and t3 (at n2)    *)
(*     are read-only over k1, k2: t2 reads k1 remotely and k2 from its     *)
(*     local backup, t3 reads k1 from its local backup and k2 from its     *)
(*     local primary.                                                      *)
(*   PartialReadTx (the commit point): t1 (at n2) writes k1 and           *)
(*     k2; t2 (at n3) reads and writes only k2, so it reads part of t1's   *)
(*     writes; t3 (at n1) reads and writes only k1.  t2 and t3 are         *)
(*     same-key read-modify-writes of t1's keys (write-write edges).       *)
(***************************************************************************)
RingPrimary == [k1 |-> "n1", k2 |-> "n2", k3 |-> "n3"]
RingBackups == [k1 |-> {"n2"}, k2 |-> {"n3"}, k3 |-> {"n1"}]

T1Skew == [c |-> "n2", r |-> {"k1", "k2"}, w |-> {"k1"}, one |-> FALSE]
T2Skew == [c |-> "n3", r |-> {"k1", "k2"}, w |-> {"k2"}, one |-> FALSE]
SkewGetOneTx   == [t1 |-> T1Skew, t2 |-> T2Skew,
                   t3 |-> [c |-> "n2", r |-> {"k1"}, w |-> {}, one |-> TRUE]]
SkewReadOnlyTx == [t1 |-> T1Skew, t2 |-> T2Skew,
                   t3 |-> [c |-> "n1", r |-> {"k1", "k2"}, w |-> {}, one |-> FALSE]]
ReadOnlyTx ==
    [t1 |-> [c |-> "n1", r |-> {"k1", "k2"}, w |-> {"k1", "k2"}, one |-> FALSE],
     t2 |-> [c |-> "n3", r |-> {"k1", "k2"}, w |-> {}, one |-> FALSE],
     t3 |-> [c |-> "n2", r |-> {"k1", "k2"}, w |-> {}, one |-> FALSE]]

PartialReadTx ==
    [t1 |-> [c |-> "n2", r |-> {"k1", "k2"}, w |-> {"k1", "k2"}, one |-> FALSE],
     t2 |-> [c |-> "n3", r |-> {"k2"}, w |-> {"k2"}, one |-> FALSE],
     t3 |-> [c |-> "n1", r |-> {"k1"}, w |-> {"k1"}, one |-> FALSE]]

\* The message-bag model's workload: t1 and t2 of PartialReadTx.
MsgsTx ==
    [t1 |-> [c |-> "n2", r |-> {"k1", "k2"}, w |-> {"k1", "k2"}, one |-> FALSE],
     t2 |-> [c |-> "n3", r |-> {"k2"}, w |-> {"k2"}, one |-> FALSE]]

Init0 == "init"            \* the value/version every key starts with
None  == "none"
Vals  == Txns \cup {Init0}

Coord(t)    == Tx[t].c
RS(t)       == Tx[t].r
WS(t)       == Tx[t].w
IsGetOne(t) == Tx[t].one
Replicas(k) == {Primary[k]} \cup Backups[k]

ASSUME WorkloadOK ==
    /\ \A k \in Keys : Primary[k] \notin Backups[k]
    /\ \A t \in Txns : /\ Coord(t) \in Nodes
                       /\ RS(t) # {}
                       /\ WS(t) \subseteq RS(t)          \* read-modify-write only
                       /\ IsGetOne(t) => (Cardinality(RS(t)) = 1 /\ WS(t) = {})

(***************************************************************************)
(* Variables every protocol spec has.                                      *)
(***************************************************************************)
VARIABLES
    alive,     \* live nodes
    crashes,   \* crash events so far (each one is followed by recovery)
    phase,     \* [Txns -> phase name]: coordinator state ("idle", ..., "done")
    dec,       \* [Txns -> {None, "commit", "abort"}]: coordinator's decision
    reported,  \* [Txns -> {None, "commit", "abort"}]: what the client was told
    obs,       \* [Txns -> [Keys -> Vals \cup {None}]]: value read for each key
    acked,     \* [Txns -> SUBSET Nodes]: responses received for the current step
    failed,    \* [Txns -> BOOLEAN]: some response of the current step said no
    lock,      \* [Nodes -> [Keys -> Txns \cup {None}]]: protocol lock per replica
    val,       \* [Nodes -> [Keys -> Vals]]: value (= version) stored at a replica
    rec,       \* [Nodes -> SUBSET Record]: the node's log (LOCK, LOG, COMMIT, ...)
    rtBefore   \* history: [Txns -> SUBSET Txns], commits reported before t began

commonVars == <<alive, crashes, phase, dec, reported, obs, acked, failed,
                lock, val, rec, rtBefore>>

Record(t, kind, ks) == [t |-> t, kind |-> kind, keys |-> ks]

\* Placement now: a key whose primary crashed is served by a live backup.
PrimaryNow(k) == IF Primary[k] \in alive THEN Primary[k]
                 ELSE CHOOSE n \in Backups[k] : n \in alive
BackupsNow(k) == (Replicas(k) \cap alive) \ {PrimaryNow(k)}
KeysPrimaryAt(n, ks) == {k \in ks : PrimaryNow(k) = n}
KeysBackupAt(n, ks)  == {k \in ks : n \in BackupsNow(k)}
HoldsLock(t, n) == \E k \in Keys : lock[n][k] = t

\* Where a read of k by t is served: locally if the coordinator is a live
\* replica of k (primary or backup, Dandelion §4.3), else by the primary.
IsLocalRead(t, k) == Coord(t) \in Replicas(k) \cap alive
ReadNode(t, k)    == IF IsLocalRead(t, k) THEN Coord(t) ELSE PrimaryNow(k)

CommitsReported == {u \in Txns : reported[u] = "commit"}

\* Nodes a step's request goes to: those where KeysAt(t, n) is not empty.
Targets(t, KeysAt(_, _)) == {n \in alive : KeysAt(t, n) # {}}

\* Node n answers t's current request: yes (ok) or no.
Respond(t, n, ok) ==
    /\ acked' = [acked EXCEPT ![t] = @ \cup {n}]
    /\ failed' = [failed EXCEPT ![t] = @ \/ ~ok]

\* All work is over; each spec's Finished step is enabled only here, so
\* TLC's deadlock check tells termination from a stuck state.
Terminated ==
    \A t \in Txns : phase[t] = "done" \/ (phase[t] = "idle" /\ Coord(t) \notin alive)

CommonInit ==
    /\ alive    = Nodes
    /\ crashes  = 0
    /\ phase    = [t \in Txns |-> "idle"]
    /\ dec      = [t \in Txns |-> None]
    /\ reported = [t \in Txns |-> None]
    /\ obs      = [t \in Txns |-> [k \in Keys |-> None]]
    /\ acked    = [t \in Txns |-> {}]
    /\ failed   = [t \in Txns |-> FALSE]
    /\ lock     = [n \in Nodes |-> [k \in Keys |-> None]]
    /\ val      = [n \in Nodes |-> [k \in Keys |-> Init0]]
    /\ rec      = [n \in Nodes |-> {}]
    /\ rtBefore = [t \in Txns |-> {}]

CommonTypeOK ==
    /\ alive \subseteq Nodes
    /\ crashes \in 0..MaxCrashes
    /\ dec \in [Txns -> {None, "commit", "abort"}]
    /\ reported \in [Txns -> {None, "commit", "abort"}]
    /\ obs \in [Txns -> [Keys -> Vals \cup {None}]]
    /\ acked \in [Txns -> SUBSET Nodes]
    /\ failed \in [Txns -> BOOLEAN]
    /\ lock \in [Nodes -> [Keys -> Txns \cup {None}]]
    /\ val \in [Nodes -> [Keys -> Vals]]
    /\ rtBefore \in [Txns -> SUBSET Txns]

(***************************************************************************)
(* Versions.  Pos(k, x) is the version number of value x of key k: writes  *)
(* are read-modify-write, so t's write of k is one past what t read.       *)
(***************************************************************************)
RECURSIVE Pos(_, _)
Pos(k, x) == IF x = Init0 THEN 0 ELSE Pos(k, obs[x][k]) + 1

\* The newest of a non-empty set of values of k (highest version).
Newest(k, S) == CHOOSE x \in S : \A y \in S : Pos(k, y) <= Pos(k, x)

(***************************************************************************)
(* Crashes.  A crash removes a set of nodes such that every key keeps at   *)
(* least one live replica; the spec then runs recovery atomically (all     *)
(* operation halts during recovery, Dandelion §4.4).  Crash(S) is the      *)
(* common precondition; each spec adds its recovery decision rule.         *)
(***************************************************************************)
CrashOK(S) ==
    /\ crashes < MaxCrashes
    /\ S # {} /\ S \subseteq alive
    /\ \A k \in Keys : Replicas(k) \cap (alive \ S) # {}

InFlight == {t \in Txns : phase[t] \notin {"idle", "done"}}

(***************************************************************************)
(* Recovery, given the live nodes A.  A spec supplies                      *)
(*   Evidence(t):       live logs show that t passed its commit checks;    *)
(*   HasWrite(n, t, k): node n's log holds t's new value of k;             *)
(*   Stable(n, k):      n's value of k with writes of transactions that    *)
(*                      do not commit rolled back.                         *)
(* A live coordinator's decision stands (undecided means abort).  A        *)
(* transaction whose coordinator crashed commits iff it writes, there is   *)
(* Evidence, and each written key's new value survives in a live log.      *)
(* Used by XenicOCC; DnlSkeleton has its own rules (Dnl4Decide,            *)
(* Dnl1Decide), which never need a copy between replicas.                  *)
(***************************************************************************)
RecoveryDecisions(A, Evidence(_), HasWrite(_, _, _)) ==
    LET Recoverable(t) == \A k \in WS(t) : \E n \in Replicas(k) \cap A : HasWrite(n, t, k)
        Decide(t) ==
            IF Coord(t) \in A THEN IF dec[t] = "commit" THEN "commit" ELSE "abort"
            ELSE IF WS(t) # {} /\ Evidence(t) /\ Recoverable(t) THEN "commit" ELSE "abort"
    IN  [t \in Txns |-> IF t \in InFlight THEN Decide(t) ELSE dec[t]]

\* The state after recovery with decisions D, all but the stores: every
\* in-flight transaction is done, the clients of live coordinators learn
\* the outcome, and no locks remain.
RecoverExceptStores(A, D) ==
    /\ alive' = A
    /\ crashes' = crashes + 1
    /\ phase' = [t \in Txns |-> IF t \in InFlight THEN "done" ELSE phase[t]]
    /\ dec' = D
    /\ reported' = [t \in Txns |-> IF t \in InFlight /\ Coord(t) \in A /\ reported[t] = None
                                    THEN D[t] ELSE reported[t]]
    /\ acked' = [t \in Txns |-> {}]
    /\ failed' = [t \in Txns |-> FALSE]
    /\ lock' = [n \in Nodes |-> [k \in Keys |-> None]]

\* Recovery with copying (XenicOCC): the shared part, and each live replica
\* of k holds the newest surviving committed value (a live replica's stable
\* value, or a committed write found in a live log or a live coordinator).
\* DnlSkeleton has its own store rule, which never copies (DnlRecover).
Recover(A, D, Stable(_, _), HasWrite(_, _, _)) ==
    LET Cands(k) ==
            {Stable(n, k) : n \in Replicas(k) \cap A}
            \cup {t \in Txns : /\ D[t] = "commit" /\ k \in WS(t)
                               /\ \/ t \in InFlight /\ Coord(t) \in A
                                  \/ \E n \in Replicas(k) \cap A : HasWrite(n, t, k)}
    IN  /\ RecoverExceptStores(A, D)
        /\ val' = [n \in Nodes |-> [k \in Keys |->
                      IF n \in A /\ n \in Replicas(k) THEN Newest(k, Cands(k)) ELSE val[n][k]]]

(***************************************************************************)
(* Correctness.                                                            *)
(*                                                                         *)
(* Committed == transactions whose coordinator (or recovery) decided       *)
(* commit.  StrictSerializable is Adya's direct serialization graph over   *)
(* Committed, with the version order given by Pos, plus real-time edges    *)
(* (u's commit was reported before t started): acyclic, no committed       *)
(* transaction read a value of a transaction that is not committed, and,   *)
(* whenever nothing is in flight, every live replica holds the newest      *)
(* committed write (no committed write was lost).                          *)
(***************************************************************************)
Committed == {t \in Txns : dec[t] = "commit"}

Edge(t, u) ==
    \/ \E k \in WS(t) \cap RS(u) : obs[u][k] = t                          \* wr
    \/ \E k \in WS(t) \cap WS(u) : Pos(k, t) < Pos(k, u)                 \* ww
    \/ \E k \in RS(t) \cap WS(u) : Pos(k, obs[t][k]) < Pos(k, u)         \* rw
    \/ t \in rtBefore[u]                                                 \* real time

Acyclic(S) ==
    \A X \in SUBSET S :
        X # {} => \E x \in X : \A y \in X : ~(y # x /\ Edge(y, x))

NoDirtyReads ==
    \A u \in Committed : \A k \in RS(u) : obs[u][k] \in Committed \cup {Init0}

Quiescent == \A t \in Txns : phase[t] \in {"idle", "done"}

LastWriter(k) == Newest(k, {Init0} \cup {t \in Committed : k \in WS(t)})

NoLostWrites ==
    Quiescent =>
        \A k \in Keys : \A n \in Replicas(k) \cap alive : val[n][k] = LastWriter(k)

StrictSerializable ==
    /\ NoDirtyReads
    /\ Acyclic(Committed)
    /\ NoLostWrites

\* Every decision reported to a client is the decision that stands, before
\* and after any recovery.
DecisionsPreserved ==
    \A t \in Txns : reported[t] # None => dec[t] = reported[t]

(***************************************************************************)
(* Non-vacuity targets: each model has configs that check one of these as  *)
(* an invariant and must find a counterexample, so a spec that can do      *)
(* nothing (or whose recovery can only abort) is caught.                   *)
(***************************************************************************)
\* Violated once a transaction with a write commits and is reported on the
\* normal path (no crash so far).
NoWriteCommitWithoutCrash ==
    crashes = 0 => \A t \in Txns : WS(t) # {} => reported[t] # "commit"

\* Violated once recovery commits a transaction with a write whose
\* coordinator crashed and whose client was never told: the recovery rule
\* can commit, not only abort.
NoRecoveryCommit ==
    ~\E t \in Txns : /\ WS(t) # {} /\ dec[t] = "commit"
                    /\ Coord(t) \notin alive /\ reported[t] = None

=============================================================================
