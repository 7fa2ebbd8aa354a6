package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// cliCommand is what `lineage PATH --help` says of one command.
type cliCommand struct {
	subcommands map[string]bool
	takesValue  map[string]bool   // long flag name → whether it takes a value
	shorthand   map[string]string // one letter → long flag name
}

// cliTree answers for the command tree of a built `lineage`, one --help a
// command, each asked once.
type cliTree struct {
	bin   string
	mu    sync.Mutex
	cache map[string]*cliCommand
}

var (
	helpFlagRE = regexp.MustCompile(`^\s+(?:-(\w), )?--([\w-]+)( \S+)?(?:\s{2,}|$)`)
	helpCmdRE  = regexp.MustCompile(`^\s+([\w-]+)\s{2,}`)
)

func (c *cliTree) command(path []string) (*cliCommand, error) {
	key := strings.Join(path, " ")
	c.mu.Lock()
	defer c.mu.Unlock()
	if cmd, ok := c.cache[key]; ok {
		return cmd, nil
	}
	out, err := exec.Command(c.bin, append(slices.Clone(path), "--help")...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("lineage %s --help: %v\n%s", key, err, out)
	}
	cmd, usage := parseHelp(string(out))
	// Cobra answers an unknown subcommand's --help with its parent's: the
	// usage must name this very command.
	if want := strings.TrimSpace("lineage " + key); usage != want && !strings.HasPrefix(usage, want+" ") {
		return nil, fmt.Errorf("lineage %s --help shows the usage of %q", key, usage)
	}
	c.cache[key] = cmd
	return cmd, nil
}

// parseHelp reads cobra's help: the usage line, the available commands,
// and the flags (local and global).
func parseHelp(help string) (*cliCommand, string) {
	cmd := &cliCommand{subcommands: map[string]bool{}, takesValue: map[string]bool{}, shorthand: map[string]string{}}
	usage, section := "", ""
	for line := range strings.SplitSeq(help, "\n") {
		if !strings.HasPrefix(line, " ") {
			section = strings.TrimSpace(line)
			continue
		}
		switch section {
		case "Usage:":
			if usage == "" {
				usage = strings.TrimSpace(line)
			}
		case "Available Commands:":
			if m := helpCmdRE.FindStringSubmatch(line); m != nil {
				cmd.subcommands[m[1]] = true
			}
		case "Flags:", "Global Flags:":
			if m := helpFlagRE.FindStringSubmatch(line); m != nil {
				cmd.takesValue[m[2]] = m[3] != ""
				if m[1] != "" {
					cmd.shorthand[m[1]] = m[2]
				}
			}
		}
	}
	return cmd, usage
}

// A cliUse is a lineage command line as the tree reads it.
type cliUse struct {
	path  []string // the subcommands: session open
	flags []string // as written, without values: --kind, -o
}

// signature is the use without its values: what a runner must exercise.
func (u cliUse) signature() string {
	return strings.Join(append(append([]string{"lineage"}, u.path...), u.flags...), " ")
}

// parseLineage reads args (after "lineage") against the tree: each word is
// a subcommand of the command so far, a flag of it (with its value), a
// positional argument, or `--`, after which the job's command is not read.
func (c *cliTree) parseLineage(args []string) (cliUse, error) {
	var u cliUse
	positional := false
	for i := 0; i < len(args); i++ {
		w := args[i]
		cmd, err := c.command(u.path)
		if err != nil {
			return u, err
		}
		if w == "--" {
			break
		}
		if !strings.HasPrefix(w, "-") || w == "-" {
			switch {
			case !positional && cmd.subcommands[w]:
				u.path = append(u.path, w)
			case len(cmd.subcommands) > 0:
				// lineage's commands with subcommands take no argument.
				return u, fmt.Errorf("%s has no command %q", cmdName(u.path), w)
			default:
				positional = true
			}
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(w, "-"), "=")
		long := name
		if !strings.HasPrefix(w, "--") {
			if long = cmd.shorthand[name]; long == "" {
				return u, fmt.Errorf("%s has no flag %s", cmdName(u.path), w)
			}
		}
		takes, ok := cmd.takesValue[long]
		if !ok {
			return u, fmt.Errorf("%s has no flag --%s", cmdName(u.path), long)
		}
		if hasValue && !takes {
			return u, fmt.Errorf("%s: --%s takes no value", cmdName(u.path), long)
		}
		if takes && !hasValue {
			if i+1 >= len(args) {
				return u, fmt.Errorf("%s: --%s needs a value", cmdName(u.path), long)
			}
			i++
		}
		flag, _, _ := strings.Cut(w, "=")
		if !slices.Contains(u.flags, flag) {
			u.flags = append(u.flags, flag)
		}
	}
	return u, nil
}

// cmdName is the command's name as typed: lineage session open.
func cmdName(path []string) string {
	return strings.Join(append([]string{"lineage"}, path...), " ")
}

// makefile is what the Makefile defines: its rules and the text, for its
// variables.
type makefile struct {
	prerequisites map[string][]string
	text          string
}

var makeRuleRE = regexp.MustCompile(`(?m)^([A-Za-z][\w.-]*):([^=].*)?$`)

func readMakefile(t *testing.T) makefile {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(top, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := makefile{prerequisites: map[string][]string{}, text: string(raw)}
	for _, r := range makeRuleRE.FindAllStringSubmatch(m.text, -1) {
		m.prerequisites[r[1]] = strings.Fields(r[2])
	}
	return m
}

// hasVar: the Makefile reads or sets the variable.
func (m makefile) hasVar(name string) bool {
	return strings.Contains(m.text, "$("+name+")") ||
		regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(name)+`\s*[?:]?=`).MatchString(m.text)
}

// runs: making target makes want, itself or as a prerequisite.
func (m makefile) runs(target, want string) bool {
	if target == want {
		return true
	}
	for _, p := range m.prerequisites[target] {
		if m.runs(p, want) {
			return true
		}
	}
	return false
}

// checkMake: every target is a rule, every VAR=value a variable of the
// Makefile, every variable in the environment one it or a script reads.
func checkMake(m makefile, c docCommand) error {
	if len(c.words) < 2 {
		return fmt.Errorf("make with no target: say which")
	}
	for _, w := range c.words[1:] {
		if name, _, ok := strings.Cut(w, "="); ok && isAssignment(w) {
			if !m.hasVar(name) {
				return fmt.Errorf("the Makefile has no variable %s", name)
			}
			continue
		}
		if strings.HasPrefix(w, "-") {
			return fmt.Errorf("make %s: the docs' make commands take no options", w)
		}
		if _, ok := m.prerequisites[w]; !ok {
			return fmt.Errorf("the Makefile has no target %q", w)
		}
	}
	for _, e := range c.env {
		name, _, _ := strings.Cut(e, "=")
		if !m.hasVar(name) && !readBySomeScript(name) {
			return fmt.Errorf("neither the Makefile nor scripts/ read %s", name)
		}
	}
	return nil
}

// readBySomeScript: a file under scripts/ names the variable.
func readBySomeScript(name string) bool {
	found := false
	_ = filepath.WalkDir(filepath.Join(top, "scripts"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || found {
			return err
		}
		if raw, err := os.ReadFile(p); err == nil && strings.Contains(string(raw), name) {
			found = true
		}
		return nil
	})
	return found
}
