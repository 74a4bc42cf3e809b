package migrate

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestLoad(t *testing.T) {
	fsys := fstest.MapFS{
		"m/0002_b.sql":   {Data: []byte("B")},
		"m/0001_a.sql":   {Data: []byte("A")},
		"m/README.md":    {Data: []byte("not a migration")},
		"m/0003_c.sql":   {Data: []byte("C")},
		"x/0001_a.sql":   {Data: []byte("A")},
		"x/0003_c.sql":   {Data: []byte("C")},
		"y/first.sql":    {Data: []byte("?")},
		"z/0001_a.sql":   {Data: []byte("A")},
		"z/01_again.sql": {Data: []byte("A")},
	}
	ms, err := Load(fsys, "m")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, m.Name+"="+m.SQL)
	}
	if strings.Join(got, " ") != "0001_a.sql=A 0002_b.sql=B 0003_c.sql=C" {
		t.Errorf("Load = %v", got)
	}
	for dir, want := range map[string]string{"x": "want 2", "y": "NNNN_title", "z": "want 2"} {
		if _, err := Load(fsys, dir); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load(%s): %v, want an error saying %q", dir, err, want)
		}
	}

	p, err := Pending(ms, 1)
	if err != nil || len(p) != 2 || p[0].Version != 2 {
		t.Errorf("Pending(ms, 1) = %v, %v", p, err)
	}
	if p, err := Pending(ms, 3); err != nil || len(p) != 0 {
		t.Errorf("Pending(ms, 3) = %v, %v", p, err)
	}
	if _, err := Pending(ms, 4); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("Pending(ms, 4): %v, want an error saying the database is newer", err)
	}
}
