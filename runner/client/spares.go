package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"
)

// spareKey names a pool of spares: the isolation mode and, for a jailed runner, the exact
// directories bound into its jail ("" for none). A jail's mounts are fixed when it starts, so a
// spare only ever serves jobs that would have had the very same mounts.
type spareKey struct {
	mode   Isolation
	mounts string
}

// sparePool is the spares of one key.
type sparePool struct {
	mounts []Mount
	spares []*process
	// starting counts spares being started, so concurrent refills do not overshoot.
	starting int
	// jobs counts the jobs seen with this key, and used is when the last one came: a mount set
	// gets spares from its second job on (a set used once, such as one with a job's temporary
	// certificate directory, would only ever waste one), the least recently used lose theirs.
	jobs int
	used time.Time
}

// mountKey is the canonical text of mounts for a spareKey: sorted, each with its writability and
// the identity (device, inode) of the directory, so a directory removed and created again under
// the same path is another key and a spare bound to the old one is never used. ok is false when
// a directory cannot be read (the job then fails on its own check, or runs without spares).
func mountKey(mounts []Mount) (key string, ok bool) {
	parts := make([]string, 0, len(mounts))
	for _, m := range mounts {
		st, err := os.Stat(m.Path)
		if err != nil {
			return "", false
		}
		sys, isUnix := st.Sys().(*syscall.Stat_t)
		if !isUnix {
			return "", false
		}
		parts = append(parts, fmt.Sprintf("%t %d:%d %s", m.Writable, sys.Dev, sys.Ino, m.Path))
	}
	slices.Sort(parts)
	return strings.Join(parts, "\x00"), true
}

// keyOf is the pool key of a job in mode with mounts (mounts count only in the jail); ok is
// false when such a job cannot use spares.
func keyOf(mode Isolation, mounts []Mount) (spareKey, []Mount, bool) {
	if mode != IsolationJailed || len(mounts) == 0 {
		return spareKey{mode: mode}, nil, true
	}
	mk, ok := mountKey(mounts)
	return spareKey{mode: mode, mounts: mk}, mounts, ok
}

// pool returns the pool of key, creating it; with mounts it also records a job of that set and
// drops what is past Config.MountedSpareSets. Call with c.mu held.
func (c *Client) poolLocked(key spareKey, mounts []Mount, job bool) *sparePool {
	p := c.pools[key]
	if p == nil {
		p = &sparePool{mounts: mounts}
		c.pools[key] = p
	}
	if job {
		p.jobs++
		p.used = time.Now()
	}
	if key.mounts != "" {
		c.trimMountPoolsLocked()
	}
	return p
}

// trimMountPoolsLocked keeps spares for at most Config.MountedSpareSets mount sets (the most
// recently used), and remembers at most four times as many sets.
func (c *Client) trimMountPoolsLocked() {
	var keys []spareKey
	for k := range c.pools {
		if k.mounts != "" {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b spareKey) int { return c.pools[b].used.Compare(c.pools[a].used) })
	withSpares := 0
	for i, k := range keys {
		p := c.pools[k]
		if len(p.spares)+p.starting > 0 || p.jobs >= 2 {
			withSpares++
		}
		if withSpares > c.cfg.MountedSpareSets || i >= 4*max(c.cfg.MountedSpareSets, 1) {
			for _, s := range p.spares {
				c.discardLocked(s)
			}
			// Another job earns the set its spares back.
			p.spares, p.jobs = nil, min(p.jobs, 1)
			if p.starting == 0 {
				delete(c.pools, k)
			}
		}
	}
}

// wantsSpares reports whether key's pool is to be kept full.
func (c *Client) wantsSparesLocked(key spareKey) bool {
	if !c.cfg.WarmSpare || c.closed {
		return false
	}
	if key.mounts == "" {
		return true
	}
	p := c.pools[key]
	return c.cfg.MountedSpareSets > 0 && p != nil && p.jobs >= 2
}

// takeSpare removes a spare of key from its pool (nil when there is none): the oldest that is
// ready, else the oldest. Whoever takes it is its only user. left says whether the pool still
// holds a spare or is starting one, read under the same lock: two jobs taking the last two
// spares at once cannot both count on the other.
func (c *Client) takeSpare(key spareKey) (p *process, left bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pool := c.pools[key]
	if pool == nil || len(pool.spares) == 0 {
		return nil, false
	}
	i := slices.IndexFunc(pool.spares, (*process).isReady)
	if i < 0 {
		i = 0
	}
	p = pool.spares[i]
	pool.spares = slices.Delete(pool.spares, i, i+1)
	return p, len(pool.spares)+pool.starting > 0
}

// isReady reports whether a preloading runner has DuckDB open (or has died).
func (p *process) isReady() bool {
	if p.ready == nil {
		return false
	}
	select {
	case <-p.ready:
		return true
	default:
		return false
	}
}

// Spares is how many spare runners of mode (with no mounts) are in the pool now.
func (c *Client) Spares(mode Isolation) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.pools[spareKey{mode: mode}]; p != nil {
		return len(p.spares)
	}
	return 0
}

// MountedSpares is how many spare jailed runners are kept for jobs with exactly mounts.
func (c *Client) MountedSpares(mounts []Mount) int {
	key, _, ok := keyOf(IsolationJailed, mounts)
	if !ok {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.pools[key]; p != nil {
		return len(p.spares)
	}
	return 0
}

// Prewarm fills the pool of spare runners for mode (WarmSpares of them; Config.WarmSpare or
// WarmSpares only) and waits until each has DuckDB open with the required extensions loaded,
// or ctx ends.
func (c *Client) Prewarm(ctx context.Context, mode Isolation) error {
	if !c.cfg.WarmSpare {
		return errors.New("Prewarm needs Config.WarmSpare or Config.WarmSpares")
	}
	m, err := resolve(mode, c.cfg.Isolation, c.cfg.Jail)
	if err != nil {
		return err
	}
	return c.prewarmKey(ctx, spareKey{mode: m})
}

// PrewarmMounted is Prewarm for jailed jobs with exactly mounts: it waits for the spares kept
// for them, once that set of mounts has had the jobs that earn it spares (see
// Config.MountedSpareSets); it fails when none are kept.
func (c *Client) PrewarmMounted(ctx context.Context, mounts []Mount) error {
	key, _, ok := keyOf(IsolationJailed, mounts)
	if !ok {
		return errors.New("a mount cannot be read")
	}
	return c.prewarmKey(ctx, key)
}

func (c *Client) prewarmKey(ctx context.Context, key spareKey) error {
	c.refill(key)
	var pool []*process
	for {
		c.mu.Lock()
		var starting int
		if p := c.pools[key]; p != nil {
			pool, starting = append([]*process(nil), p.spares...), p.starting
		}
		changed := c.changed
		c.mu.Unlock()
		if starting == 0 {
			break
		}
		// Another refill is starting spares: wait for it.
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if len(pool) == 0 {
		return fmt.Errorf("no spare %s runner could be started", key.mode)
	}
	for _, p := range pool {
		select {
		case <-p.ready:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// refill starts spares of key until its pool holds WarmSpares (counting those starting).
func (c *Client) refill(key spareKey) {
	for {
		c.mu.Lock()
		pool := c.reserveLocked(key)
		c.mu.Unlock()
		if pool == nil || !c.startReserved(key, pool) {
			return
		}
	}
}

// refillAsync reserves the first spare to start for key before it returns (so that a job that
// comes next finds it starting and waits for it rather than starting a runner of its own), and
// starts it and the rest in the background.
func (c *Client) refillAsync(key spareKey) {
	c.mu.Lock()
	pool := c.reserveLocked(key)
	if pool != nil {
		c.background++
		c.mu.Unlock()
		go func() {
			defer c.backgroundEnded()
			if c.startReserved(key, pool) {
				c.refill(key)
			}
		}()
		return
	}
	c.mu.Unlock()
}

// reserveLocked counts one more spare of key as starting, or returns nil when the pool is full
// (or key wants none).
func (c *Client) reserveLocked(key spareKey) *sparePool {
	if !c.wantsSparesLocked(key) {
		return nil
	}
	pool := c.poolLocked(key, nil, false)
	if len(pool.spares)+pool.starting >= c.cfg.WarmSpares {
		return nil
	}
	pool.starting++
	return pool
}

// startReserved starts the spare reserved in pool and adds it; false when it could not be
// started or is not wanted any more.
func (c *Client) startReserved(key spareKey, pool *sparePool) bool {
	p, err := c.spawnSpare(key, pool.mounts)
	c.mu.Lock()
	defer c.mu.Unlock()
	pool.starting--
	close(c.changed)
	c.changed = make(chan struct{})
	if err != nil {
		c.cfg.Logger.Warn("start a spare DuckDB runner", "isolation", key.mode, "mounts", len(pool.mounts), "error", err)
		return false
	}
	if !c.wantsSparesLocked(key) || c.pools[key] != pool {
		c.discardLocked(p)
		return false
	}
	pool.spares = append(pool.spares, p)
	return true
}

// waitStartingLocked returns a channel closed once a spare of key being started is up (or failed
// to start); nil when none is being started. Call with c.mu held.
func (c *Client) waitStartingLocked(key spareKey) <-chan struct{} {
	if p := c.pools[key]; p != nil && p.starting > 0 {
		return c.changed
	}
	return nil
}

// spawnSpare starts a preloading runner for key, after checking that its mounts are still the
// directories the key names.
func (c *Client) spawnSpare(key spareKey, mounts []Mount) (*process, error) {
	if key.mounts != "" {
		if now, ok := mountKey(mounts); !ok || now != key.mounts {
			return nil, errors.New("a directory of the mount set changed: no spare for it")
		}
	}
	return c.spawn(key.mode, true, mounts)
}

// Close stops the spare runners.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	pools := c.pools
	c.pools = map[spareKey]*sparePool{}
	c.mu.Unlock()
	for _, pool := range pools {
		for _, p := range pool.spares {
			discard(p)
		}
	}
	c.mu.Lock()
	for c.background > 0 {
		c.backgroundDone.Wait()
	}
	c.mu.Unlock()
	return nil
}

// discardLocked discards p in the background (it waits for the process to exit), counted for
// Close. Call with c.mu held.
func (c *Client) discardLocked(p *process) {
	c.background++
	go func() {
		defer c.backgroundEnded()
		discard(p)
	}()
}

func (c *Client) backgroundEnded() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.background--; c.background == 0 {
		c.backgroundDone.Broadcast()
	}
}

func discard(p *process) {
	p.kill()
	p.cleanup()
}
