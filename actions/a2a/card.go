package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	"github.com/seed72275b23/agency-go/agency"
)

// ExtensionURI names the card extension through which a served agent
// tells the JSON Schema of each skill's arguments (A2A skills have no
// place for one): its params hold {"actions": {NAME: {"args": schema,
// "returns": schema}}}. A client of this package reads it to offer the
// skills as actions with those schemas.
const ExtensionURI = "https://github.com/seed72275b23/agency-go/a2a/actions/v1"

// BearerScheme is the name of the security scheme the cards declare when
// the server checks tokens.
const BearerScheme = "bearer"

// serveCard serves the card of the agent in the path, or of the root agent.
func (s *Server) serveCard(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if id == "" {
		id = s.cfg.Root
	}
	if s.agents[id] == nil {
		http.Error(w, fmt.Sprintf("no agent %q is served here", id), http.StatusNotFound)
		return
	}
	caller := s.cfg.Anonymous
	if s.cfg.Authenticate != nil {
		if token, ok := bearer(r); ok {
			if c, err := s.cfg.Authenticate(r.Context(), token); err == nil && agency.ValidateID(c) == nil {
				caller = c // a caller with a token sees its own view
			}
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	card, err := s.Card(ctx, id, caller, s.base(r))
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	var body []byte
	if s.cfg.Compat03 {
		body, err = a2av0.NewStaticAgentCardProducer(card).(interface {
			CardJSON(context.Context) ([]byte, error)
		}).CardJSON(ctx)
	} else {
		body, err = json.MarshalIndent(card, "", "  ")
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	_, _ = w.Write(body)
}

// base is the URL the server is reached at, for a request.
func (s *Server) base(r *http.Request) string {
	if s.cfg.BaseURL != "" {
		return s.cfg.BaseURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// Card returns the card of the served agent id as the given caller sees
// it, with base the URL the server is reached at: one skill per action
// that help shows the caller.
func (s *Server) Card(ctx context.Context, id, caller, base string) (*a2a.AgentCard, error) {
	if s.agents[id] == nil {
		return nil, fmt.Errorf("a2a: no agent %q is served", id)
	}
	proxy, err := s.caller(ctx, caller)
	if err != nil {
		return nil, err
	}
	actions, err := s.help(ctx, proxy, id)
	if err != nil {
		if errors.Is(err, agency.ErrNoRecipient) {
			return nil, fmt.Errorf("a2a: agent %q is not in the space", id)
		}
		return nil, fmt.Errorf("a2a: the help of %q: %w", id, err)
	}
	url := strings.TrimSuffix(base, "/") + "/agents/" + id + "/"
	desc := s.cfg.Descriptions[id]
	if desc == "" {
		desc = id + ", an agent of an agency-go space. Each skill is one of its actions: " + usage + "."
	}
	card := &a2a.AgentCard{
		Name:                id,
		Description:         desc,
		Version:             s.cfg.Version,
		SupportedInterfaces: []*a2a.AgentInterface{{URL: url, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2a.Version}},
		DefaultInputModes:   []string{"text/plain", "application/json"},
		DefaultOutputModes:  []string{"text/plain", "application/json"},
		Skills:              []a2a.AgentSkill{},
	}
	if s.cfg.Compat03 {
		card.SupportedInterfaces = append(card.SupportedInterfaces, &a2a.AgentInterface{URL: url + "v0.3", ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2av0.Version})
	}
	schemas := make(map[string]any, len(actions))
	names := make([]string, 0, len(actions))
	for name := range actions {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		h := actions[name]
		skill := a2a.AgentSkill{ID: name, Name: name, Description: h.Description, Tags: []string{"action"}}
		if skill.Description == "" {
			skill.Description = "the action " + name + " of " + id
		}
		if h.Access == "requested" {
			skill.Tags = append(skill.Tags, "requires-approval")
		}
		for _, ex := range h.Examples {
			var m struct {
				Action map[string]json.RawMessage `json:"action"`
			}
			if json.Unmarshal(ex, &m) == nil && m.Action[name] != nil {
				b, _ := json.Marshal(map[string]any{"action": name, "args": m.Action[name]})
				skill.Examples = append(skill.Examples, string(b))
			}
		}
		card.Skills = append(card.Skills, skill)
		entry := map[string]any{"args": h.Args}
		if len(h.Args) == 0 {
			entry["args"] = map[string]any{"type": "object"}
		}
		if len(h.Returns) > 0 {
			entry["returns"] = h.Returns
		}
		schemas[name] = entry
	}
	card.Capabilities = a2a.AgentCapabilities{
		Streaming: true,
		Extensions: []a2a.AgentExtension{{
			URI:         ExtensionURI,
			Description: "the JSON Schema of each skill's arguments and result; call a skill with a data part {\"action\": SKILL, \"args\": {...}}",
			Params:      map[string]any{"actions": schemas},
		}},
	}
	if s.cfg.Authenticate != nil {
		card.SecuritySchemes = a2a.NamedSecuritySchemes{BearerScheme: a2a.HTTPAuthSecurityScheme{Scheme: "Bearer", Description: "a token the server's operator gives each caller; it names the caller"}}
		card.SecurityRequirements = a2a.SecurityRequirementsOptions{{BearerScheme: a2a.SecuritySchemeScopes{}}}
	}
	return card, nil
}
