package main

import (
	"context"
	"fmt"
	"regexp"
	"sort"
)

// Suite is one benchmark: it owns one section of BENCHMARKS.md, named after it. Suites live in
// this package (one file each) and register themselves from an init function:
//
//	func init() { Register(forkSuite{}) }
//
// Run returns the section's markdown body (without the markers; start it with a "## " heading).
// It gets a shared Env (Postgres cluster, progress output, machine description, worker
// subprocesses) and must keep within a couple of minutes on 2 cores: `make bench` runs every
// suite and should finish in about 10 minutes.
type Suite interface {
	Name() string
	Run(ctx context.Context, env *Env) (markdown string, err error)
}

var (
	suites    []Suite
	validName = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)
)

// Register adds a suite; names must be unique and match [a-z][a-z0-9_-]*.
func Register(s Suite) {
	if !validName.MatchString(s.Name()) {
		panic(fmt.Sprintf("bench: suite name %q must match %s", s.Name(), validName))
	}
	for _, have := range suites {
		if have.Name() == s.Name() {
			panic(fmt.Sprintf("bench: suite %q registered twice", s.Name()))
		}
	}
	suites = append(suites, s)
}

// selectSuites returns the registered suites named in only (all when empty), in name order.
func selectSuites(only []string) ([]Suite, error) {
	byName := map[string]Suite{}
	var names []string
	for _, s := range suites {
		byName[s.Name()] = s
		names = append(names, s.Name())
	}
	sort.Strings(names)
	if len(only) == 0 {
		only = names
	}
	var out []Suite
	for _, n := range only {
		s, ok := byName[n]
		if !ok {
			return nil, fmt.Errorf("no benchmark suite %q (have: %v)", n, names)
		}
		out = append(out, s)
	}
	return out, nil
}
