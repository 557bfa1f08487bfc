// Command health computes, for Kubernetes objects read from a JSON file, the
// two GitOps health verdicts a platform team sees:
//
//   - kstatus (sigs.k8s.io/cli-utils/pkg/kstatus/status), the library behind
//     Flux's health checks and `kubectl wait`-style tooling;
//   - the Argo CD health of a Lua health check (deploy/argocd/health.lua),
//     run with gopher-lua, the interpreter Argo CD embeds, in a sandbox
//     like Argo CD's (base, table, string and math only; `obj` global; the
//     script returns {status, message}).
//
// Usage: health -lua deploy/argocd/health.lua OBJECTS.json
//
// OBJECTS.json is a JSON array of objects, or a List ({"items": [...]}).
// Output: one JSON object per input object, one per line:
// {"kind", "name", "kstatus", "kstatusMessage", "argocd", "argocdMessage"}.
// Exit status 1 when an input cannot be read or a script fails.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

type verdict struct {
	Kind           string `json:"kind"`
	Name           string `json:"name"`
	Kstatus        string `json:"kstatus"`
	KstatusMessage string `json:"kstatusMessage"`
	Argocd         string `json:"argocd"`
	ArgocdMessage  string `json:"argocdMessage"`
}

func main() {
	script := flag.String("lua", "deploy/argocd/health.lua", "the Argo CD Lua health check")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: health -lua SCRIPT OBJECTS.json")
		os.Exit(2)
	}
	code, err := os.ReadFile(*script)
	if err != nil {
		fail(err)
	}
	raw, err := os.ReadFile(flag.Arg(0))
	if err != nil {
		fail(err)
	}
	objects, err := decode(raw)
	if err != nil {
		fail(err)
	}
	out := json.NewEncoder(os.Stdout)
	for _, o := range objects {
		u := &unstructured.Unstructured{Object: o}
		res, err := status.Compute(u)
		if err != nil {
			fail(fmt.Errorf("kstatus of %s/%s: %w", u.GetKind(), u.GetName(), err))
		}
		hs, msg, err := argocd(string(code), o)
		if err != nil {
			fail(fmt.Errorf("lua health of %s/%s: %w", u.GetKind(), u.GetName(), err))
		}
		if err := out.Encode(verdict{
			Kind: u.GetKind(), Name: u.GetName(),
			Kstatus: res.Status.String(), KstatusMessage: res.Message,
			Argocd: hs, ArgocdMessage: msg,
		}); err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "health:", err)
	os.Exit(1)
}

// decode reads a JSON array of objects or a List, the way client-go does
// (whole numbers become int64, as unstructured accessors expect).
func decode(raw []byte) ([]map[string]interface{}, error) {
	var list []map[string]interface{}
	if err := utiljson.Unmarshal(raw, &list); err == nil {
		return list, nil
	}
	var wrapped struct {
		Items []map[string]interface{} `json:"items"`
	}
	if err := utiljson.Unmarshal(raw, &wrapped); err != nil {
		return nil, fmt.Errorf("neither a JSON array nor a List: %w", err)
	}
	return wrapped.Items, nil
}

// argocd runs the health script the way Argo CD does: a fresh VM with only
// the safe libraries, the object as the global `obj`, and a returned table
// with `status` and `message`.
func argocd(script string, obj map[string]interface{}) (string, string, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		fn   lua.LGFunction
	}{
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
		{lua.StringLibName, lua.OpenString},
		{lua.MathLibName, lua.OpenMath},
	} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.fn), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			return "", "", err
		}
	}
	l.SetGlobal("obj", toLua(l, obj))
	if err := l.DoString(script); err != nil {
		return "", "", err
	}
	ret, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return "", "", fmt.Errorf("the script returned %s, not a table", l.Get(-1).Type())
	}
	return lua.LVAsString(ret.RawGetString("status")), lua.LVAsString(ret.RawGetString("message")), nil
}

// toLua converts decoded JSON to Lua values: objects and arrays become
// tables (arrays 1-based), numbers LNumber, null nil.
func toLua(l *lua.LState, v interface{}) lua.LValue {
	switch x := v.(type) {
	case map[string]interface{}:
		t := l.NewTable()
		for k, e := range x {
			t.RawSetString(k, toLua(l, e))
		}
		return t
	case []interface{}:
		t := l.NewTable()
		for _, e := range x {
			t.Append(toLua(l, e))
		}
		return t
	case string:
		return lua.LString(x)
	case float64:
		return lua.LNumber(x)
	case int64:
		return lua.LNumber(x)
	case bool:
		return lua.LBool(x)
	default:
		return lua.LNil
	}
}
