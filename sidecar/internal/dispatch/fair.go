package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// Classes of request kinds. Each class has workers of its own, so control-plane requests (ping,
// cluster and workspace changes) never wait behind jobs, however many jobs are queued, nor behind
// remote requests (Config.Remote), which wait for connections of their own.
const (
	classControl = iota
	classJob
	classRemote
	numClasses
)

// classOf is the class of a request: Config.JobKinds are jobs, the rest control-plane, by the
// kind Config.SchedulingKind says the request is scheduled as (its own kind by default).
func (d *Dispatcher) classOf(req request.Request) int {
	kind := req.Kind
	if d.cfg.SchedulingKind != nil {
		kind = d.cfg.SchedulingKind(req)
	}
	if slices.Contains(d.cfg.JobKinds, kind) {
		return classJob
	}
	if d.cfg.Remote != nil && d.cfg.Remote(req) {
		return classRemote
	}
	return classControl
}

// jobOwner is who a job counts against for the per-user and per-workspace caps.
type jobOwner struct{ user, workspace string }

// ownerOf is who and where a job counts against for the caps: Config.SchedulingOwner's answer
// (a satellite envelope's is the satellite row's requester and workspace, which the envelope
// carries), by default the requester and args.workspace.
func (d *Dispatcher) ownerOf(req request.Request) jobOwner {
	if d.cfg.SchedulingOwner != nil {
		user, workspace := d.cfg.SchedulingOwner(req)
		return jobOwner{user: user, workspace: workspace}
	}
	var a struct {
		Workspace string `json:"workspace"`
	}
	_ = json.Unmarshal(req.Args, &a)
	return jobOwner{user: req.RequestedBy, workspace: a.Workspace}
}

// pickLocked returns the index in the queue of the next entry a worker of class should take, or
// -1. Control-plane: the oldest. Jobs: among those whose user and workspace are below their caps,
// the one whose user runs the fewest jobs, oldest first; so one user's flood of jobs takes at
// most JobsPerUser slots, and another user's job takes the next free slot.
func (d *Dispatcher) pickLocked(class int) int {
	best := -1
	for i, e := range d.queue {
		if e.class != class {
			continue
		}
		if class != classJob {
			return i // oldest first
		}
		if d.jobsByUser[e.owner.user] >= d.cfg.JobsPerUser ||
			(e.owner.workspace != "" && d.jobsByWorkspace[e.owner.workspace] >= d.cfg.JobsPerWorkspace) {
			continue
		}
		if best < 0 || d.jobsByUser[e.owner.user] < d.jobsByUser[d.queue[best].owner.user] {
			best = i
		}
	}
	return best
}

// startLocked counts a job the worker took against its caps; doneLocked releases them.
func (d *Dispatcher) startLocked(e *entry) {
	if e.class == classJob {
		d.jobsByUser[e.owner.user]++
		d.jobsByWorkspace[e.owner.workspace]++
		d.jobsRunning++
	}
}

func (d *Dispatcher) doneLocked(e *entry) {
	if e.class != classJob {
		return
	}
	if d.jobsByUser[e.owner.user]--; d.jobsByUser[e.owner.user] <= 0 {
		delete(d.jobsByUser, e.owner.user)
	}
	if d.jobsByWorkspace[e.owner.workspace]--; d.jobsByWorkspace[e.owner.workspace] <= 0 {
		delete(d.jobsByWorkspace, e.owner.workspace)
	}
	d.jobsRunning--
}

// pokeClass wakes an idle worker of class.
func (d *Dispatcher) pokeClass(class int) {
	select {
	case d.wakes[class] <- struct{}{}:
	default:
	}
}

// queueChanged asks the queue reporter to tell waiting jobs where they stand.
func (d *Dispatcher) queueChanged() {
	select {
	case d.queueSig <- struct{}{}:
	default:
	}
}

// queueNote is what one waiting job is told.
type queueNote struct {
	e    *entry
	text string
}

// waitingNotesLocked describes every queued job that is not about to start: its position among
// the waiting jobs and what it waits for.
func (d *Dispatcher) waitingNotesLocked() []queueNote {
	var notes []queueNote
	pos, total := 0, 0
	for _, e := range d.queue {
		if e.class == classJob {
			total++
		}
	}
	for _, e := range d.queue {
		if e.class != classJob {
			continue
		}
		pos++
		why := fmt.Sprintf("all %d job slots are busy", d.cfg.JobConcurrency)
		switch {
		case d.jobsByUser[e.owner.user] >= d.cfg.JobsPerUser:
			why = fmt.Sprintf("%s runs %d jobs already (at most %d per user)", e.owner.user, d.jobsByUser[e.owner.user], d.cfg.JobsPerUser)
		case e.owner.workspace != "" && d.jobsByWorkspace[e.owner.workspace] >= d.cfg.JobsPerWorkspace:
			why = fmt.Sprintf("workspace %s runs %d jobs already (at most %d per workspace)", e.owner.workspace,
				d.jobsByWorkspace[e.owner.workspace], d.cfg.JobsPerWorkspace)
		case d.jobsRunning < d.cfg.JobConcurrency:
			continue // a worker is about to take it
		}
		notes = append(notes, queueNote{e: e, text: fmt.Sprintf("position %d of %d waiting jobs: %s", pos, total, why)})
	}
	return notes
}

// reportQueue writes a "queue" step to each waiting job whose position or reason changed, at
// most every QueueReportEvery, until ctx ends. Best effort: a row not visible yet, or one claimed
// meanwhile, simply gets no step (the UPDATE matches pending rows only).
func (d *Dispatcher) reportQueue(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.queueSig:
		}
		d.mu.Lock()
		notes := d.waitingNotesLocked()
		d.mu.Unlock()
		for _, n := range notes {
			if n.e.queueNote == n.text {
				continue
			}
			n.e.queueNote = n.text
			b, _ := json.Marshal([]request.Step{{Name: "queue", Status: "waiting", Detail: n.text, At: d.cfg.Now().UTC()}})
			if _, err := d.cfg.Pool.Exec(ctx, appendQueueStepSQL, n.e.req.ID, b); err != nil && ctx.Err() == nil {
				d.cfg.Logger.Warn("recording a job's queue position failed", "request", n.e.req.ID, "error", err)
			}
			d.cfg.Signals.send(sigQueued, Event{Request: n.e.req.ID, Reason: n.text})
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(d.cfg.QueueReportEvery):
		}
	}
}
