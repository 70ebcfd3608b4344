----------------------------- MODULE DnlSkeleton -----------------------------
(***************************************************************************)
(* The Dandelion commit-phase skeleton (Dandelion §4.2): a lock-free       *)
(* execution phase, then Locking -> Read validation -> Replication ->      *)
(* Unlocking, each step customised by which replicas (P, B) and which set  *)
(* (R, W) it visits, any step elidable.  Protocol picks a row of Table;    *)
(* Dnl4.tla, Dnl2.tla, Dnl1.tla and DnlRO.tla are the models CI runs.      *)
(*                                                                         *)
(* Design A (where a backup's value lives before the decision): every      *)
(* value a replica receives before it is made visible is a pending record  *)
(* in its log (LOCK carrying values, REPL); the store (val) changes only   *)
(* when the decision reaches that replica: Unlock at a lock holder,        *)
(* Readable at a Dnl-4/2 backup, or recovery from the replica's own        *)
(* record.  So nothing is ever rolled back, and recovery never copies a    *)
(* value from one replica to another.                                      *)
(*                                                                         *)
(* Link to the code (paths under nic-runtime/src/protocol/; the rows,      *)
(* servers, coordinator and recovery are written):                        *)
(*   Table, Row, Order, Has, NextPhase, LockKeysAt, ValKeysAt, ReplKeysAt  *)
(*       skeleton.rs (Row, next_step, the key-set functions);              *)
(*   Dnl4Row, Dnl2Row, Dnl1Row  the ROW constants of dnl4.rs, dnl2.rs,     *)
(*       dnl1.rs; read-only transactions and GetOne: dnl_ro.rs;            *)
(*   <Step>Done, StepDone       coordinator/dnl.rs dnl_step_done;          *)
(*   Read/ReadLocal, Lock, Replicate, Unlock, Readable (servers)           *)
(*       server/dnl.rs get, lock; server/dnl_steps.rs replicate, unlock,   *)
(*       readable; one wire kind each; ValidateReads: VALIDATE's handler;  *)
(*   Dnl4Decide, Dnl1Decide     the recovery rules dnl4::decide (also used *)
(*       by Dnl-2) and dnl1::decide, called by the recovery epoch's        *)
(*       decide step; DnlRecover the Applied round (apply_recovered_dnl).  *)
(*                                                                         *)
(* Actions (TLC's traces name them; the code's steps carry these names):   *)
(*   Read(t, k)          Get RPC to k's primary (coordinator holds no      *)
(*                       replica of k); returns value and version even if  *)
(*                       locked or not readable (Dandelion §4.2.1);        *)
(*   ReadLocal(t, k)     the same Get served by the coordinator's own      *)
(*                       replica of k, primary or backup (Dandelion §4.3); *)
(*                       a backup returns its visible (older) value while  *)
(*                       a write is pending there; validation catches it;  *)
(*   GetOne(t)           single-key read, no commit phase: fails if the    *)
(*                       replica it reads is locked or not READABLE (until *)
(*                       the code has READABLE at backups, a lone read     *)
(*                       there is validated, as a Dnl-RO transaction is);  *)
(*   Lock(t, n)          lock t's keys at n (no-wait), checking each read  *)
(*                       version; the request carries the written values,  *)
(*                       kept as a pending LOCK record;                    *)
(*   ValidateReads(t, n) primary n: read keys unlocked, versions unchanged;*)
(*   Replicate(t, n)     after the decision: a pending REPL record of t's  *)
(*                       writes at n (a Dnl-2 primary: a marker, its       *)
(*                       values came with Lock); a backup lowers READABLE; *)
(*                       never refused (no abort after Replicate);         *)
(*   Unlock(t, n)        install (commit) or drop (abort) at a lock        *)
(*                       holder, COMMIT or ABORT record, unlock; a commit  *)
(*                       also installs t's replicated values at n when n   *)
(*                       is a backup of t's other keys (the code's one     *)
(*                       COMMIT applies every pending record of t there);  *)
(*                       READABLE stays down until t's Readable;           *)
(*   Readable(t, n)      at the report point: a Dnl-4/2 backup installs    *)
(*                       t's writes from its own REPL record, appends      *)
(*                       COMMIT, raises READABLE and acks;                 *)
(*   <Step>Done(t)       coordinator: the step's last response is in       *)
(*                       (ExecDone, LockDone, ValidateReadsDone,           *)
(*                       ReplicateDone, UnlockDone, ReadableDone); the     *)
(*                       slot is free (phase "done") only after the        *)
(*                       Unlock and Readable acks of every value holder;   *)
(*   Crash(S)            nodes S fail; recovery decides every in-flight    *)
(*                       transaction (Dnl4Decide / Dnl1Decide) and each    *)
(*                       live replica installs committed writes from its   *)
(*                       own records only (DnlRecover).                    *)
(*                                                                         *)
(* Client reports follow the rtt counts in the protocols' names: Dnl-4     *)
(* reports commit after the Unlock acks (4 rtts), Dnl-2 after the          *)
(* Replicate acks (2), Dnl-1 after the Lock acks (1).  Aborts are reported *)
(* at once, except in Dnl-1, which reports them after the Unlock acks.     *)
(* Readable messages go out only once the commit is reported: with Unlock  *)
(* in Dnl-2, after the Unlock acks in Dnl-4 (a fifth round holding only    *)
(* the slot).  Dnl-4 and Dnl-2 never abort after Replicate.                *)
(*                                                                         *)
(* Recovery rules (t in flight; A the live nodes; a live replica of a key  *)
(* is a caught-up one: these models have no rejoin):                       *)
(*   a live coordinator's abort stands; its commit stands only once        *)
(*   durable (Row.durable: Dnl-4/2 after the Replicate acks, Dnl-1 after   *)
(*   the Lock acks); otherwise it counts as undecided and the records      *)
(*   decide: a live COMMIT record -> commit; a live ABORT record -> abort; *)
(*   then                                                                  *)
(*   Dnl-4/2 (Dnl4Decide): commit iff some live node holds REPL and every  *)
(*     live replica of every written key holds a value record of t (LOCK  *)
(*     with values, REPL or COMMIT);                                       *)
(*   Dnl-1 (Dnl1Decide): commit iff every live replica of every locked key *)
(*     (read and write sets: LockKeys, the code's lock_shards) holds t's   *)
(*     LOCK, and none holds its ABORT;                                     *)
(*   otherwise abort.  A commit therefore never needs a value copied.      *)
(*                                                                         *)
(* Simplifications:                                                        *)
(*   - a request and its response are one step; per node, Lock is all or   *)
(*     nothing over the keys the request carries;                          *)
(*   - on abort, Lock requests still unanswered are dropped (the locks     *)
(*     they would briefly take are not modelled);                          *)
(*   - recovery is one atomic step (operation halts during recovery, and   *)
(*     no message from an older epoch is ever handled); the crashed node   *)
(*     is not replaced and its replicas are not rebuilt (Dandelion §4.4):  *)
(*     no rejoin, no re-replication, so "caught-up replica" is "live       *)
(*     replica" here;                                                      *)
(*   - the host table, the NIC cache, the Dnl batching stack and           *)
(*     thread-level concurrency are out of scope: one step at a node is    *)
(*     atomic; the host applying a COMMIT record is part of that step;     *)
(*   - writes are read-modify-write of existing keys (see SplitkvCommon),  *)
(*     as the code's procedures are: a write is a put of an existing key   *)
(*     at the version read, an insert only a write of a key read at        *)
(*     version 0.  Blind puts, Room at Lock, deletes, PutOne/InsertOne/    *)
(*     DeleteOne and the DELETED flag are not modelled;                    *)
(*   - no rejoin (joining backups, Dnl-1's unchecked Lock there), no       *)
(*     NIC-runtime-only restart, no message loss or epochs, no deadlines   *)
(*     (so no resent Replicate); see tla/README.md.                        *)
(***************************************************************************)
EXTENDS SplitkvCommon

CONSTANT Protocol   \* a key of Table

VARIABLE
    nr      \* [Nodes -> [Keys -> Txns \cup {None}]]: READABLE lowered by (None = readable)

vars == <<commonVars, nr>>

(***************************************************************************)
(* The protocol table (Dandelion Table 4; DESIGN.md "Commit protocols";    *)
(* the code's Row).                                                        *)
(*   lockAt, replAt: replicas visited ("P", "B"); lockR: lock the read set *)
(*   too; validate: Read validation step; reportCommit: step after which   *)
(*   commit is reported ("decision" = as soon as the checks passed);       *)
(*   reportAbort: likewise for abort; durable: the step after whose acks a *)
(*   live coordinator's commit counts for recovery; evidence: recovery     *)
(*   rule ("values": Dnl4Decide, "all-locked": Dnl1Decide); readable:      *)
(*   Replicate lowers READABLE at backups; readableAt: when Readable may   *)
(*   go out ("report": once the commit is reported).                       *)
(* Read-only transactions always run Dnl-RO: ValidateReads only.           *)
(*                                                                         *)
(* The rows after the first three are broken on purpose, one design        *)
(* choice undone each; check.sh requires TLC to find the named violation:  *)
(*   Dnl4NoValidation      no Read validation: write skew commits          *)
(*                         (StrictSerializable);                           *)
(*   Dnl4NoReadable        Replicate leaves READABLE up: a GetOne at a     *)
(*                         backup returns the old value after the commit   *)
(*                         was reported (StrictSerializable);              *)
(*   Dnl4EarlyReadable     Readable sent at the Replicate acks, before the *)
(*                         report: a GetOne at the backup returns a write  *)
(*                         that recovery then aborts (StrictSerializable); *)
(*   Dnl4EarlyReport       commit reported after the Replicate acks, not   *)
(*                         the Unlock acks (DecisionsPreserved);           *)
(*   Dnl4EarlyDurable      a live coordinator's commit counts from the     *)
(*                         decision, before the Replicate acks: recovery   *)
(*                         commits while a live backup has no value        *)
(*                         (StrictSerializable: NoLostWrites);             *)
(*   Dnl4ReplIgnored       Dnl4Decide without its REPL rule (commit only   *)
(*                         on a COMMIT record); on the Dnl-2 row, whose    *)
(*                         commit is reported before any COMMIT record     *)
(*                         (DecisionsPreserved);                           *)
(*   DnlCopyless_weak      Dnl4Decide's value clause weakened to "some     *)
(*                         live replica of each written key holds a value" *)
(*                         with no copy (StrictSerializable: NoLostWrites);*)
(*   Dnl2NoReadLocks       Dnl-2 locking only the write set; Lock still    *)
(*                         checks the read versions at the primaries       *)
(*                         (StrictSerializable: write skew);               *)
(*   Dnl1NoBackupLocks     Locking skips backups: a GetOne at a backup     *)
(*                         returns the value from before a reported        *)
(*                         commit (StrictSerializable);                    *)
(*   Dnl1EarlyAbortReport  abort reported before the Unlock acks: recovery *)
(*                         finds t's locks everywhere and commits it       *)
(*                         (DecisionsPreserved);                           *)
(*   Dnl1RecordRule        Dnl-1 with Dnl4Decide: a commit reported after  *)
(*                         the Lock acks has no REPL or COMMIT record and  *)
(*                         recovery aborts it (DecisionsPreserved).        *)
(***************************************************************************)
Dnl4Row == [lockAt |-> {"P"}, lockR |-> FALSE, validate |-> TRUE,
            replAt |-> {"B"}, reportCommit |-> "unlock",
            reportAbort |-> "decision", durable |-> "replicate",
            evidence |-> "values", readable |-> TRUE, readableAt |-> "report"]
Dnl2Row == [lockAt |-> {"P"}, lockR |-> TRUE, validate |-> FALSE,
            replAt |-> {"P", "B"}, reportCommit |-> "replicate",
            reportAbort |-> "decision", durable |-> "replicate",
            evidence |-> "values", readable |-> TRUE, readableAt |-> "report"]
Dnl1Row == [lockAt |-> {"P", "B"}, lockR |-> TRUE, validate |-> FALSE,
            replAt |-> {}, reportCommit |-> "decision",
            reportAbort |-> "unlock", durable |-> "lock",
            evidence |-> "all-locked", readable |-> TRUE, readableAt |-> "report"]

Table == [Dnl4 |-> Dnl4Row,
          Dnl2 |-> Dnl2Row,
          Dnl1 |-> Dnl1Row,
          Dnl4NoValidation     |-> [Dnl4Row EXCEPT !.validate = FALSE],
          Dnl4NoReadable       |-> [Dnl4Row EXCEPT !.readable = FALSE],
          Dnl4EarlyReadable    |-> [Dnl4Row EXCEPT !.readableAt = "replicate"],
          Dnl4EarlyReport      |-> [Dnl4Row EXCEPT !.reportCommit = "replicate"],
          Dnl4EarlyDurable     |-> [Dnl4Row EXCEPT !.durable = "validate"],
          Dnl4ReplIgnored      |-> [Dnl2Row EXCEPT !.evidence = "commit-record"],
          DnlCopyless_weak     |-> [Dnl4Row EXCEPT !.evidence = "some-value"],
          Dnl2NoReadLocks      |-> [Dnl2Row EXCEPT !.lockR = FALSE],
          Dnl1NoBackupLocks    |-> [Dnl1Row EXCEPT !.lockAt = {"P"}],
          Dnl1EarlyAbortReport |-> [Dnl1Row EXCEPT !.reportAbort = "decision"],
          Dnl1RecordRule       |-> [Dnl1Row EXCEPT !.evidence = "values"]]

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
\* Reads neither locked nor validated are version-checked by Lock at their
\* primary, unlocked.  Empty for every real row (Dnl-4 validates them,
\* Dnl-2 and Dnl-1 lock them); used by the broken Dnl2NoReadLocks.
CheckKeysAt(t, n) == IF WS(t) = {} \/ Row.lockAt = {} THEN {}
                     ELSE KeysPrimaryAt(n, (RS(t) \ LockKeys(t)) \ ValKeys(t))
LockReqKeysAt(t, n) == LockKeysAt(t, n) \cup CheckKeysAt(t, n)

(* The records of t at n, and the keys they name. *)
HasRec(n, t, kinds) == \E r \in rec[n] : r.t = t /\ r.kind \in kinds
RecKeys(n, t, kind) == UNION {r.keys : r \in {r \in rec[n] : r.t = t /\ r.kind = kind}}
\* n's log holds t's new value of k (LOCK carrying values, REPL or COMMIT).
HasValue(n, t, k) ==
    k \in WS(t) /\ \E r \in rec[n] : r.t = t /\ r.kind \in {"LOCK", "REPL", "COMMIT"} /\ k \in r.keys
\* Keys a Readable of t makes visible at backup n: replicated, not installed.
ReadableKeysAt(t, n) == KeysBackupAt(n, RecKeys(n, t, "REPL")) \ RecKeys(n, t, "COMMIT")

(* The commit steps t goes through, in order.  "readable" is the round of  *)
(* Readable acks; it holds only the coordinator's slot.                    *)
Order == <<"exec", "lock", "validate", "replicate", "unlock", "readable", "done">>
Idx(s) == CHOOSE i \in 1..Len(Order) : Order[i] = s
Has(t, s) ==
    CASE s = "lock"      -> WS(t) # {} /\ Row.lockAt # {}
      [] s = "validate"  -> ValKeys(t) # {}
      [] s = "replicate" -> WS(t) # {} /\ Row.replAt # {}
      [] s = "unlock"    -> WS(t) # {} /\ Row.lockAt # {}
      [] s = "readable"  -> WS(t) # {} /\ "B" \in Row.replAt /\ dec[t] = "commit"
      [] s = "done"      -> TRUE
NextPhase(t, s) ==
    LET js == {j \in (Idx(s) + 1)..Len(Order) : Has(t, Order[j])}
    IN  Order[CHOOSE j \in js : \A j2 \in js : j <= j2]
IsCheck(s) == s \in {"exec", "lock", "validate"}

StepComplete(t, s) ==
    CASE s = "exec"      -> \A k \in RS(t) : obs[t][k] # None
      [] s = "lock"      -> Targets(t, LockReqKeysAt) \subseteq acked[t] \/ failed[t]
      [] s = "validate"  -> Targets(t, ValKeysAt) \subseteq acked[t] \/ failed[t]
      [] s = "replicate" -> Targets(t, ReplKeysAt) \subseteq acked[t]
      [] s = "unlock"    -> \A n \in alive : ~HoldsLock(t, n)
      [] s = "readable"  -> \A n \in alive : ReadableKeysAt(t, n) = {}

TypeOK ==
    /\ CommonTypeOK
    /\ phase \in [Txns -> {"idle", "done"} \cup {Order[i] : i \in 1..Len(Order)}]
    /\ nr \in [Nodes -> [Keys -> Txns \cup {None}]]

Init ==
    /\ CommonInit
    /\ nr = [n \in Nodes |-> [k \in Keys |-> None]]

-----------------------------------------------------------------------------
(* Execution phase *)

Start(t) ==
    /\ phase[t] = "idle" /\ ~IsGetOne(t) /\ Coord(t) \in alive
    /\ phase' = [phase EXCEPT ![t] = "exec"]
    /\ rtBefore' = [rtBefore EXCEPT ![t] = CommitsReported]
    /\ UNCHANGED <<alive, crashes, dec, reported, obs, acked, failed, lock, val, rec, nr>>

DoRead(t, k) ==
    /\ phase[t] = "exec" /\ k \in RS(t) /\ obs[t][k] = None
    /\ obs' = [obs EXCEPT ![t][k] = val[ReadNode(t, k)][k]]
    /\ UNCHANGED <<alive, crashes, phase, dec, reported, acked, failed, lock, val, rec,
                   rtBefore, nr>>

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
    /\ UNCHANGED <<alive, crashes, acked, failed, lock, val, rec, nr>>

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
    /\ UNCHANGED <<alive, crashes, obs, lock, val, rec, rtBefore, nr>>

\* (The phase test is repeated in each so that TLC's traces name the step.)
ExecDone(t)          == phase[t] = "exec"      /\ StepDone(t, "exec")
LockDone(t)          == phase[t] = "lock"      /\ StepDone(t, "lock")
ValidateReadsDone(t) == phase[t] = "validate"  /\ StepDone(t, "validate")
ReplicateDone(t)     == phase[t] = "replicate" /\ StepDone(t, "replicate")
UnlockDone(t)        == phase[t] = "unlock"    /\ StepDone(t, "unlock")
ReadableDone(t)      == phase[t] = "readable"  /\ StepDone(t, "readable")

-----------------------------------------------------------------------------
(* Servers *)

\* Locks K, checks the versions of K and of the check-only reads C, and
\* keeps t's values of K as a pending LOCK record.
Lock(t, n) ==
    /\ phase[t] = "lock" /\ n \in Targets(t, LockReqKeysAt) \ acked[t]
    /\ LET K  == LockKeysAt(t, n)
           C  == LockReqKeysAt(t, n)
           ok == /\ \A k \in K : lock[n][k] = None
                 /\ \A k \in C : val[n][k] = obs[t][k]
       IN /\ Respond(t, n, ok)
          /\ IF ok /\ K # {}
             THEN /\ lock' = [lock EXCEPT ![n] = [k \in Keys |-> IF k \in K THEN t ELSE @[k]]]
                  /\ rec' = [rec EXCEPT ![n] = @ \cup {Record(t, "LOCK", K)}]
             ELSE UNCHANGED <<lock, rec>>
    /\ UNCHANGED <<alive, crashes, phase, dec, reported, obs, val, rtBefore, nr>>

ValidateReads(t, n) ==
    /\ phase[t] = "validate" /\ n \in Targets(t, ValKeysAt) \ acked[t]
    /\ Respond(t, n, \A k \in ValKeysAt(t, n) : lock[n][k] = None /\ val[n][k] = obs[t][k])
    /\ UNCHANGED <<alive, crashes, phase, dec, reported, obs, lock, val, rec, rtBefore, nr>>

\* After the decision: a pending REPL record; the store is not touched.
Replicate(t, n) ==
    /\ phase[t] = "replicate" /\ n \in Targets(t, ReplKeysAt) \ acked[t]
    /\ LET K  == ReplKeysAt(t, n)
           KB == KeysBackupAt(n, K)
       IN /\ rec' = [rec EXCEPT ![n] = @ \cup {Record(t, "REPL", K)}]
          /\ nr' = IF Row.readable
                   THEN [nr EXCEPT ![n] = [k \in Keys |-> IF k \in KB THEN t ELSE @[k]]]
                   ELSE nr
    /\ Respond(t, n, TRUE)
    /\ UNCHANGED <<alive, crashes, phase, dec, reported, obs, lock, val, rtBefore>>

\* Install (commit) or drop (abort) t's pending writes at a lock holder.
\* The code's host applies every pending record of t at n at its COMMIT
\* record: at a lock holder that is also a backup of other keys of t, its
\* replicated values KR too (newest version wins); READABLE stays down there
\* until t's Readable, which installs nothing new.
Unlock(t, n) ==
    /\ phase[t] = "unlock" /\ n \in alive /\ HoldsLock(t, n)
    /\ LET K  == {k \in Keys : lock[n][k] = t}
           KW == IF dec[t] = "commit" THEN K \cap WS(t) ELSE {}
           KR == IF dec[t] = "commit" THEN ReadableKeysAt(t, n) ELSE {}
       IN /\ lock' = [lock EXCEPT ![n] = [k \in Keys |-> IF k \in K THEN None ELSE @[k]]]
          /\ val' = [val EXCEPT ![n] = [k \in Keys |->
                        IF k \in KW THEN t
                        ELSE IF k \in KR THEN Newest(k, {t, @[k]}) ELSE @[k]]]
          /\ rec' = [rec EXCEPT ![n] = @ \cup
                        {Record(t, IF dec[t] = "commit" THEN "COMMIT" ELSE "ABORT", K)}]
    /\ UNCHANGED <<alive, crashes, phase, dec, reported, obs, acked, failed, rtBefore, nr>>

\* At the report point (never before): a backup installs t's writes from its
\* own REPL record (newest version wins: Readables of two transactions may
\* arrive in either order), appends COMMIT and raises READABLE.
Readable(t, n) ==
    /\ phase[t] \in {"unlock", "readable"} /\ dec[t] = "commit"
    /\ Row.readableAt = "report" => reported[t] = "commit"
    /\ n \in alive /\ ReadableKeysAt(t, n) # {}
    /\ LET K == ReadableKeysAt(t, n)
       IN /\ val' = [val EXCEPT ![n] = [k \in Keys |->
                        IF k \in K THEN Newest(k, {t, @[k]}) ELSE @[k]]]
          /\ rec' = [rec EXCEPT ![n] = @ \cup {Record(t, "COMMIT", K)}]
          /\ nr' = [nr EXCEPT ![n] = [k \in Keys |->
                       IF k \in K /\ @[k] = t THEN None ELSE @[k]]]
    /\ UNCHANGED <<alive, crashes, phase, dec, reported, obs, lock, acked, failed, rtBefore>>

-----------------------------------------------------------------------------
(* Crash and recovery (Dandelion §4.4).  A is the set of live nodes.        *)

\* A live coordinator's commit counts once its Row.durable step is acked.
Durable(t) == dec[t] = "commit" /\ Idx(phase[t]) > Idx(Row.durable)

\* Rules 1-3, shared: a live coordinator's decided outcome (its commit only
\* once durable), a live COMMIT record, a live ABORT record; None if none
\* applies.
Known(A, t) ==
    IF Coord(t) \in A /\ dec[t] = "abort" THEN "abort"
    ELSE IF Coord(t) \in A /\ Durable(t) THEN "commit"
    ELSE IF \E n \in A : HasRec(n, t, {"COMMIT"}) THEN "commit"
    ELSE IF \E n \in A : HasRec(n, t, {"ABORT"}) THEN "abort"
    ELSE None

\* dnl4::decide (Dnl-4 and Dnl-2): then commit iff some live node holds
\* REPL and every live replica of every written key holds a value record.
\* The two broken evidence values weaken that rule 4.
Dnl4Decide(A, t) ==
    LET repl   == \E n \in A : HasRec(n, t, {"REPL"})
        every  == \A k \in WS(t) : \A n \in Replicas(k) \cap A : HasValue(n, t, k)
        some   == \A k \in WS(t) : \E n \in Replicas(k) \cap A : HasValue(n, t, k)
        rule4  == CASE Row.evidence = "values"        -> repl /\ every
                    [] Row.evidence = "some-value"    -> repl /\ some
                    [] Row.evidence = "commit-record" -> FALSE
    IN  IF Known(A, t) # None THEN Known(A, t)
        ELSE IF WS(t) # {} /\ rule4 THEN "commit" ELSE "abort"

\* dnl1::decide: then commit iff every live replica of every locked key
\* (LockKeys: the read and write sets) holds t's LOCK and none its ABORT.
Dnl1Decide(A, t) ==
    LET allLocked ==
            \A k \in LockKeys(t) : \A n \in Replicas(k) \cap A :
                /\ k \in RecKeys(n, t, "LOCK")
                /\ ~HasRec(n, t, {"ABORT"})
    IN  IF Known(A, t) # None THEN Known(A, t)
        ELSE IF WS(t) # {} /\ allLocked THEN "commit" ELSE "abort"

DnlDecisions(A) ==
    [t \in Txns |-> IF t \notin InFlight THEN dec[t]
                    ELSE IF Row.evidence = "all-locked" THEN Dnl1Decide(A, t)
                    ELSE Dnl4Decide(A, t)]

\* No copy between replicas: each live replica installs the committed
\* writes it holds a record of (the Applied round's CommitPending); an
\* aborted record is dropped, and nothing was applied early, so nothing is
\* rolled back.
DnlRecover(A, D) ==
    LET Own(n, k) == {t \in InFlight : D[t] = "commit" /\ HasValue(n, t, k)}
    IN  /\ RecoverExceptStores(A, D)
        /\ val' = [n \in Nodes |-> [k \in Keys |->
                      IF n \in A /\ n \in Replicas(k)
                      THEN Newest(k, {val[n][k]} \cup Own(n, k)) ELSE val[n][k]]]

Crash(S) ==
    /\ CrashOK(S)
    /\ DnlRecover(alive \ S, DnlDecisions(alive \ S))
    /\ nr' = [n \in Nodes |-> [k \in Keys |-> None]]
    /\ UNCHANGED <<obs, rec, rtBefore>>

Finished == Terminated /\ UNCHANGED vars

Next ==
    \/ \E t \in Txns :
        \/ Start(t) \/ GetOne(t)
        \/ ExecDone(t) \/ LockDone(t) \/ ValidateReadsDone(t) \/ ReplicateDone(t)
        \/ UnlockDone(t) \/ ReadableDone(t)
        \/ \E k \in Keys : Read(t, k) \/ ReadLocal(t, k)
        \/ \E n \in Nodes : Lock(t, n) \/ ValidateReads(t, n) \/ Replicate(t, n)
                            \/ Unlock(t, n) \/ Readable(t, n)
    \/ \E S \in SUBSET Nodes : Crash(S)
    \/ Finished

Spec == Init /\ [][Next]_vars

\* Non-vacuity for Dnl-RO: no read-only transaction ever commits having
\* read a value some transaction wrote.
NoReadOnlyCommitSeesWrite ==
    \A t \in Txns : (WS(t) = {} /\ ~IsGetOne(t) /\ dec[t] = "commit")
                       => \A k \in RS(t) : obs[t][k] = Init0

\* Non-vacuity for aborts: no transaction with a write is ever reported
\* aborted without a crash (so a conflict is detected and its abort path,
\* Dnl-1's Unlock round included, runs to the report).
NoWriteAbortWithoutCrash ==
    crashes = 0 => \A t \in Txns : WS(t) # {} => reported[t] # "abort"

\* Non-vacuity for GetOne: none ever returns a written value without a
\* crash (so READABLE and locks are released again on the normal path).
NoGetOneSeesWriteWithoutCrash ==
    crashes = 0 => \A t \in Txns : (IsGetOne(t) /\ dec[t] = "commit")
                                   => \A k \in RS(t) : obs[t][k] = Init0
=============================================================================
