------------------------------- MODULE SingleKey -------------------------------
(***************************************************************************)
(* Single-key calls in one round at the key's primary (Dandelion §3:      *)
(* GetOne, PutOne, DeleteOne) on Xenic's OCC with the commit point at every          *)
(* replica's LOG acknowledgement (Xenic §4.2; XenicOCC.tla), as the code  *)
(* runs them: nic-runtime/src/protocol/single_key.rs (caller and shipped  *)
(* writes) and protocol/server/get_one.rs (GetOne at the primary).        *)
(*                                                                         *)
(* Three nodes; key x: primary n1, backup n2; key y: primary n2, backup   *)
(* n3 (the first live replica is the primary: a crash promotes the        *)
(* backup). Three writes:                                                  *)
(*  - T, a multi-key transaction coordinated at n3, writes x := 1, y := 1;*)
(*  - P, a PutOne of x := 2 from a caller at n3, shipped to x's primary   *)
(*    n1 and coordinated there (WriteOneStart): an ordinary transaction   *)
(*    of n1, whose outcome n1 sends back (WriteOneReply);                 *)
(*  - D, a DeleteOne of x from a caller at n3, shipped like P: its        *)
(*    compare "present" is read under x's lock; a present x gets its     *)
(*    tombstone (Tomb: read as absent, at the next version), an absent x  *)
(*    nothing (the caller hears "not found"; DeleteAbsent).               *)
(* Every installed object carries a version: a write's is the one its     *)
(* primary held when it locked the key, plus one (the key stays locked   *)
(* until the write is installed, so that is the newest).                  *)
(* Two sequential readers of GetOnes: R1 reads x then y, R2 y then x.     *)
(* One crash of n1 or n2, with crash recovery as one atomic step:         *)
(* every write in flight is decided by Xenic's rule (commit iff its       *)
(* coordinator passed the commit point, a survivor took its COMMIT, or    *)
(* every written key has a survivor holding its LOG), committed values    *)
(* installed at the survivors, locks released. A caller whose primary     *)
(* died before it answered reports the outcome unknown (CallerGivesUp).  *)
(*                                                                         *)
(* Per key a lock at its primary; a write's steps: Lock (no-wait: a held  *)
(* lock aborts it), LOG at each replica (Log), the commit point           *)
(* (CommitPoint), COMMIT installing at the primary, which unlocks         *)
(* (Install) and applying at the backup (Apply), then the report          *)
(* (Report: after every replica took its COMMIT). A write may abort       *)
(* before its commit point (a deadline: AbortBeforeCommitPoint).          *)
(*                                                                         *)
(* Correctness:                                                            *)
(*  - NoLostReportedWrite: a write reported committed is never decided    *)
(*    aborted (by recovery or otherwise);                                  *)
(*  - ReadsCommitted: a GetOne returns the initial value or a committed   *)
(*    write's;                                                             *)
(*  - ReadsSeeReported: a GetOne that starts after a write of its key was *)
(*    reported committed does not return the initial value;              *)
(*  - NoFracturedRead: a reader that saw T's write of one key then reads  *)
(*    the other sees T's write there too (or a later one): T is not both  *)
(*    before and after it;                                                 *)
(*  - VersionNamesOneValue: no version of a key is installed with two     *)
(*    values (what OCC validation, which compares versions, relies on).  *)
(*                                                                         *)
(* Must-fail models: SingleKeyGetIgnoresLock (GetOneRead ignores the      *)
(* lock: T installed x at n1 while y is still locked at n2, R1 reads the  *)
(* new x and then the old y; NoFracturedRead) and SingleKeyReportEarly    *)
(* (the primary answers a PutOne once its own LOG is appended, before the *)
(* commit point; n1 crashes, n2 lacks the LOG and recovery aborts it:     *)
(* NoLostReportedWrite; SingleKeyReportEarly_crash without deadline      *)
(* aborts, so only the crash loses it), and SingleKeyDeleteRemoves (a    *)
(* delete that removes x, back to version 0, instead of writing its      *)
(* tombstone: the next write of x reuses a version another value had;    *)
(* VersionNamesOneValue). SingleKey_nonvacuous shows the good end state  *)
(* is reached; SingleKey_delete_nonvacuous that the delete commits and a  *)
(* reader sees its tombstone.                                             *)
(***************************************************************************)
EXTENDS Naturals, Sequences, FiniteSets

CONSTANTS
    GetIgnoresLock,   \* TRUE: the bug of SingleKeyGetIgnoresLock
    ReplyAtLocalLog,  \* TRUE: the bug of SingleKeyReportEarly
    DeadlineAborts,   \* whether a write may abort before its commit point
    DeleteRemoves,    \* TRUE: the bug of SingleKeyDeleteRemoves
    MaxCrashes

Nodes == {1, 2, 3}
Keys == {"x", "y"}
Writes == {"T", "P", "D"}
Shipped == {"P", "D"}   \* single-key writes shipped to x's primary
Tomb == 3               \* a tombstone: read as absent
Readers == {"R1", "R2"}
None == "none"

Replicas(k) == IF k = "x" THEN <<1, 2>> ELSE <<2, 3>>
ReplicaSet(k) == {Replicas(k)[1], Replicas(k)[2]}
W(w) == IF w = "T" THEN {"x", "y"} ELSE {"x"}
Value(w) == CASE w = "T" -> 1 [] w = "P" -> 2 [] OTHER -> Tomb
Coordinator(w) == IF w = "T" THEN 3 ELSE 1   \* P, D: x's primary at the start
Absent(v) == v \in {0, Tomb}
ReadOrder(r) == IF r = "R1" THEN <<"x", "y">> ELSE <<"y", "x">>

VARIABLES
    alive,      \* live nodes
    crashes,    \* crashes so far
    lock,       \* key -> the write holding its lock at its primary, or None
    logs,       \* pending LOG records: <<node, write, key>>
    val,        \* node -> key -> installed (visible) value; 0 initially
    wstate,     \* write -> "init" | "locked" | "committed" | "done" | "aborted"
    decision,   \* write -> None | "commit" | "abort" (final once set)
    installed,  \* COMMITs taken: <<write, key, node>>
    told,       \* write -> what its client was told: None | "committed" | "aborted" | "unknown"
    results,    \* reader -> values its GetOnes returned, in order
    seen,       \* reader -> for each GetOne, the writes reported committed when it started
    ver,        \* node -> key -> installed version; 0 initially
    wver,       \* write -> key -> the version it writes (fixed when it locks)
    hist        \* every <<key, version, value>> ever installed somewhere

vars == <<alive, crashes, lock, logs, val, wstate, decision, installed, told, results, seen,
          ver, wver, hist>>
vv == <<ver, wver, hist>>

Primary(k) == IF Replicas(k)[1] \in alive THEN Replicas(k)[1] ELSE Replicas(k)[2]
CoordAlive(w) == Coordinator(w) \in alive

Init ==
    /\ alive = Nodes
    /\ crashes = 0
    /\ lock = [k \in Keys |-> None]
    /\ logs = {}
    /\ val = [n \in Nodes |-> [k \in Keys |-> 0]]
    /\ wstate = [w \in Writes |-> "init"]
    /\ decision = [w \in Writes |-> None]
    /\ installed = {}
    /\ told = [w \in Writes |-> None]
    /\ results = [r \in Readers |-> <<>>]
    /\ seen = [r \in Readers |-> <<>>]
    /\ ver = [n \in Nodes |-> [k \in Keys |-> 0]]
    /\ wver = [w \in Writes |-> [k \in Keys |-> 0]]
    /\ hist = {<<k, 0, 0>> : k \in Keys}

\* What w installs at k: its value and version; a delete that removes the
\* key (the bug) leaves it as never written, version 0.
WVal(w) == IF w = "D" /\ DeleteRemoves THEN 0 ELSE Value(w)
WVer(w, k) == IF w = "D" /\ DeleteRemoves THEN 0 ELSE wver[w][k]

\* EXECUTE at the primaries (for P, WriteOneStart at n1): lock every key.
Lock(w) ==
    /\ wstate[w] = "init" /\ CoordAlive(w)
    /\ \A k \in W(w) : lock[k] = None
    /\ w = "D" => ~Absent(val[Primary("x")]["x"])
    /\ lock' = [k \in Keys |-> IF k \in W(w) THEN w ELSE lock[k]]
    /\ wstate' = [wstate EXCEPT ![w] = "locked"]
    /\ wver' = [wver EXCEPT ![w] = [k \in Keys |-> ver[Primary(k)][k] + 1]]
    /\ UNCHANGED <<alive, crashes, logs, val, decision, installed, told, results, seen,
                   ver, hist>>

\* D's compare fails (x absent at its primary, read under the lock): the
\* failure branch writes nothing and commits; the caller hears "not found".
DeleteAbsent ==
    /\ wstate["D"] = "init" /\ CoordAlive("D")
    /\ lock["x"] = None
    /\ Absent(val[Primary("x")]["x"])
    /\ wstate' = [wstate EXCEPT !["D"] = "done"]
    /\ decision' = [decision EXCEPT !["D"] = "commit"]
    /\ told' = [told EXCEPT !["D"] = "notfound"]
    /\ UNCHANGED <<alive, crashes, lock, logs, val, installed, results, seen, vv>>

LockConflict(w) ==
    /\ wstate[w] = "init" /\ CoordAlive(w)
    /\ \E k \in W(w) : lock[k] # None
    /\ wstate' = [wstate EXCEPT ![w] = "aborted"]
    /\ decision' = [decision EXCEPT ![w] = "abort"]
    /\ told' = [told EXCEPT ![w] = "aborted"]
    /\ UNCHANGED <<alive, crashes, lock, logs, val, installed, results, seen, vv>>

Log(w, k, n) ==
    /\ wstate[w] = "locked" /\ CoordAlive(w)
    /\ k \in W(w) /\ n \in ReplicaSet(k) /\ n \in alive
    /\ <<n, w, k>> \notin logs
    /\ logs' = logs \cup {<<n, w, k>>}
    /\ UNCHANGED <<alive, crashes, lock, val, wstate, decision, installed, told, results, seen, vv>>

\* Every replica of every written key acknowledged its LOG.
CommitPoint(w) ==
    /\ wstate[w] = "locked" /\ CoordAlive(w)
    /\ \A k \in W(w) : \A n \in ReplicaSet(k) : <<n, w, k>> \in logs
    /\ wstate' = [wstate EXCEPT ![w] = "committed"]
    /\ decision' = [decision EXCEPT ![w] = "commit"]
    /\ UNCHANGED <<alive, crashes, lock, logs, val, installed, told, results, seen, vv>>

Release(w) == [k \in Keys |-> IF lock[k] = w THEN None ELSE lock[k]]

AbortBeforeCommitPoint(w) ==
    /\ DeadlineAborts
    /\ wstate[w] = "locked" /\ CoordAlive(w)
    /\ lock' = Release(w)
    /\ logs' = {l \in logs : l[2] # w}
    /\ wstate' = [wstate EXCEPT ![w] = "aborted"]
    /\ decision' = [decision EXCEPT ![w] = "abort"]
    /\ told' = [told EXCEPT ![w] = IF @ = None THEN "aborted" ELSE @]
    /\ UNCHANGED <<alive, crashes, val, installed, results, seen, vv>>

\* COMMIT at the primary: install, then unlock (after its record is appended).
Install(w, k) ==
    LET n == Primary(k) IN
    /\ wstate[w] = "committed" /\ CoordAlive(w) /\ k \in W(w)
    /\ <<w, k, n>> \notin installed
    /\ val' = [val EXCEPT ![n][k] = WVal(w)]
    /\ ver' = [ver EXCEPT ![n][k] = WVer(w, k)]
    /\ hist' = hist \cup {<<k, WVer(w, k), WVal(w)>>}
    /\ installed' = installed \cup {<<w, k, n>>}
    /\ logs' = logs \ {<<n, w, k>>}
    /\ lock' = [lock EXCEPT ![k] = IF @ = w THEN None ELSE @]
    /\ UNCHANGED <<alive, crashes, wstate, decision, told, results, seen, wver>>

\* COMMIT at a backup: its host applies the pending LOG record.
Apply(w, k, n) ==
    /\ wstate[w] = "committed" /\ CoordAlive(w) /\ k \in W(w)
    /\ n \in alive /\ n # Primary(k) /\ <<n, w, k>> \in logs
    /\ val' = [val EXCEPT ![n][k] = WVal(w)]
    /\ ver' = [ver EXCEPT ![n][k] = WVer(w, k)]
    /\ hist' = hist \cup {<<k, WVer(w, k), WVal(w)>>}
    /\ installed' = installed \cup {<<w, k, n>>}
    /\ logs' = logs \ {<<n, w, k>>}
    /\ UNCHANGED <<alive, crashes, lock, wstate, decision, told, results, seen, wver>>

\* Every live replica took its COMMIT: the client is told (for P, the
\* primary's WriteOneReply and the caller's report).
Report(w) ==
    /\ wstate[w] = "committed" /\ CoordAlive(w)
    /\ \A k \in W(w) : \A n \in ReplicaSet(k) \cap alive : <<w, k, n>> \in installed
    /\ wstate' = [wstate EXCEPT ![w] = "done"]
    /\ told' = [told EXCEPT ![w] = IF @ = None THEN "committed" ELSE @]
    /\ UNCHANGED <<alive, crashes, lock, logs, val, decision, installed, results, seen, vv>>

\* The bug of SingleKeyReportEarly: P's primary answers once its own LOG
\* is appended, before the commit point.
WriteOneReplyEarly ==
    /\ ReplyAtLocalLog
    /\ wstate["P"] = "locked" /\ CoordAlive("P") /\ told["P"] = None
    /\ <<Coordinator("P"), "P", "x">> \in logs
    /\ told' = [told EXCEPT !["P"] = "committed"]
    /\ UNCHANGED <<alive, crashes, lock, logs, val, wstate, decision, installed, results, seen, vv>>

\* A shipped write's primary died before it answered: the caller reports
\* "unknown".
CallerGivesUp(w) ==
    /\ w \in Shipped /\ ~CoordAlive(w) /\ told[w] = None
    /\ told' = [told EXCEPT ![w] = "unknown"]
    /\ UNCHANGED <<alive, crashes, lock, logs, val, wstate, decision, installed, results, seen, vv>>

\* A GetOne at the key's primary: refused (and retried) while the key is
\* locked there; otherwise the installed value.
GetOneRead(r) ==
    LET i == Len(results[r]) + 1
        k == ReadOrder(r)[i]
    IN
    /\ i <= 2
    /\ GetIgnoresLock \/ lock[k] = None
    /\ results' = [results EXCEPT ![r] = Append(@, val[Primary(k)][k])]
    /\ seen' = [seen EXCEPT ![r] = Append(@, {w \in Writes : told[w] = "committed"})]
    /\ UNCHANGED <<alive, crashes, lock, logs, val, wstate, decision, installed, told, vv>>

\* Xenic's recovery rule for a write in flight after the crash: commit if
\* its coordinator survived past the commit point, or a survivor took its
\* COMMIT (a decision record), or every written key has a survivor holding
\* its LOG.
RecoverCommits(w, live) ==
    \/ wstate[w] = "committed" /\ Coordinator(w) \in live
    \/ \E k \in W(w), n \in live : <<w, k, n>> \in installed
    \/ \A k \in W(w) : \E n \in ReplicaSet(k) \cap live : <<n, w, k>> \in logs

\* A crash of n1 or n2 (every key keeps a live replica) and the recovery
\* epoch, as one step.
CrashAndRecover(n) ==
    LET live == alive \ {n}
        inflight == {w \in Writes : wstate[w] \in {"locked", "committed"}}
        commits == {w \in inflight : RecoverCommits(w, live)}
        aborts == inflight \ commits
        unstarted(w) == wstate[w] = "init" /\ Coordinator(w) = n
        \* The value a survivor holds for k: newest version wins (the host
        \* log's apply rule), over what it holds and the committed writes in
        \* flight.
        newer(m, k) == {w \in commits : k \in W(w) /\ WVer(w, k) > ver[m][k]}
        writer(m, k) == CHOOSE w \in newer(m, k) :
                            \A w2 \in newer(m, k) : WVer(w2, k) <= WVer(w, k)
        newval(m, k) == IF newer(m, k) # {} THEN WVal(writer(m, k)) ELSE val[m][k]
        newver(m, k) == IF newer(m, k) # {} THEN WVer(writer(m, k), k) ELSE ver[m][k]
    IN
    /\ crashes < MaxCrashes /\ n \in {1, 2} /\ n \in alive
    /\ alive' = live
    /\ crashes' = crashes + 1
    /\ val' = [m \in Nodes |-> IF m \in live THEN [k \in Keys |-> newval(m, k)] ELSE val[m]]
    /\ ver' = [m \in Nodes |-> IF m \in live THEN [k \in Keys |-> newver(m, k)] ELSE ver[m]]
    /\ hist' = hist \cup UNION {{<<k, WVer(w, k), WVal(w)>> : k \in W(w)} : w \in commits}
    /\ lock' = [k \in Keys |-> IF lock[k] \in inflight THEN None ELSE lock[k]]
    /\ logs' = {l \in logs : l[2] \notin inflight}
    \* A write whose coordinator died before it started never runs.
    /\ wstate' = [w \in Writes |-> IF w \in commits THEN "done"
                                  ELSE IF w \in aborts \/ unstarted(w) THEN "aborted"
                                  ELSE wstate[w]]
    /\ decision' = [w \in Writes |-> IF w \in commits THEN "commit"
                                    ELSE IF w \in aborts \/ unstarted(w) THEN "abort"
                                    ELSE decision[w]]
    /\ told' = [w \in Writes |->
                  IF w \in inflight /\ Coordinator(w) \in live /\ told[w] = None
                  THEN IF w \in commits THEN "committed" ELSE "aborted"
                  ELSE told[w]]
    /\ UNCHANGED <<installed, results, seen, wver>>

Done ==
    /\ \A w \in Writes : wstate[w] \in {"done", "aborted"} /\ told[w] # None
    /\ \A r \in Readers : Len(results[r]) = 2

Finished == Done /\ UNCHANGED vars

Next ==
    \/ \E w \in Writes : Lock(w) \/ LockConflict(w) \/ CommitPoint(w)
                         \/ AbortBeforeCommitPoint(w) \/ Report(w)
    \/ \E w \in Writes, k \in Keys : Install(w, k)
    \/ \E w \in Writes, k \in Keys, n \in Nodes : Log(w, k, n) \/ Apply(w, k, n)
    \/ WriteOneReplyEarly \/ DeleteAbsent
    \/ \E w \in Writes : CallerGivesUp(w)
    \/ \E r \in Readers : GetOneRead(r)
    \/ \E n \in Nodes : CrashAndRecover(n)
    \/ Finished

Spec == Init /\ [][Next]_vars

-----------------------------------------------------------------------------
TypeOK ==
    /\ alive \subseteq Nodes
    /\ lock \in [Keys -> Writes \cup {None}]
    /\ wstate \in [Writes -> {"init", "locked", "committed", "done", "aborted"}]
    /\ decision \in [Writes -> {None, "commit", "abort"}]
    /\ told \in [Writes -> {None, "committed", "aborted", "unknown", "notfound"}]
    /\ ver \in [Nodes -> [Keys -> Nat]]

NoLostReportedWrite ==
    \A w \in Writes : told[w] = "committed" => decision[w] # "abort"

ReadsCommitted ==
    \A r \in Readers : \A i \in 1..Len(results[r]) :
        results[r][i] = 0 \/ \E w \in Writes : Value(w) = results[r][i] /\ decision[w] = "commit"

ReadsSeeReported ==
    \A r \in Readers : \A i \in 1..Len(results[r]) :
        (\E w \in seen[r][i] : ReadOrder(r)[i] \in W(w)) => results[r][i] # 0

\* T wrote both keys: a reader that saw T's value of its first key cannot
\* then find the second key never written (only T writes y, and T or P x).
NoFracturedRead ==
    \A r \in Readers :
        Len(results[r]) = 2 /\ results[r][1] = Value("T") => results[r][2] # 0

\* A version of a key names one value: validation, which compares versions,
\* then never takes a changed key for an unchanged one.
VersionNamesOneValue ==
    \A a, b \in hist : a[1] = b[1] /\ a[2] = b[2] => a[3] = b[3]

\* Non-vacuity of the delete: it committed its tombstone, a reader saw it,
\* and x was written again after it.
NeverDeleteSeen ==
    ~(/\ told["D"] = "committed"
      /\ \E r \in Readers : \E i \in 1..Len(results[r]) : results[r][i] = Tomb
      /\ \E e \in hist : e[1] = "x" /\ e[2] > wver["D"]["x"])

\* Non-vacuity: both readers saw T on their first key, and P committed.
NeverAllSeen ==
    ~(/\ \A r \in Readers : Len(results[r]) = 2 /\ results[r][1] = Value("T")
      /\ told["P"] = "committed")
=============================================================================
