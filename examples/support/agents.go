package main

import (
	"context"
	"log/slog"

	"github.com/seed72275b23/agency-go/actions/handoff"
	"github.com/seed72275b23/agency-go/actions/human"
	"github.com/seed72275b23/agency-go/agency"
)

// The ids of the agents, as the seed names its teams.
const (
	triageID  = "Triage"
	salesID   = "Sales"
	refundsID = "Refunds"
	humanID   = "Human"
	shopID    = "Shop"
	userID    = "User"
)

// allIDs are the agents of the program, in the order they join a space.
var allIDs = []string{shopID, salesID, refundsID, humanID, triageID, userID}

// The seed's system prompts.
const (
	triagePrompt = "You are a customer service bot for ACME Inc. " +
		"Introduce yourself. Always be very brief. " +
		"Gather information to direct the customer to the right department. " +
		"But make your questions subtle and natural."
	salesPrompt = "You are a sales agent for ACME Inc." +
		"Always answer in a sentence or less." +
		"Follow the following routine with the user:" +
		"1. Ask them about any problems in their life related to catching roadrunners.\n" +
		"2. Casually mention one of ACME's crazy made-up products can help.\n" +
		" - Don't mention price.\n" +
		"3. Once the user is bought in, drop a ridiculous price.\n" +
		"4. Only after everything, and if the user says yes, " +
		"tell them a crazy caveat and execute their order.\n"
	refundsPrompt = "You are a customer support agent for ACME Inc." +
		"Always answer in a sentence or less." +
		"Follow the following routine with the user:" +
		"1. First, ask probing questions and understand the user's problem deeper.\n" +
		" - unless the user has already provided a reason.\n" +
		"2. Propose a fix (make one up).\n" +
		"3. ONLY if not satesfied, offer a refund.\n" +
		"4. If accepted, search for the ID and then execute refund."
)

// The shop's tools, with the seed's parameters.
type searchArgs struct {
	Query string `json:"search_query" jsonschema:"description=a description or keywords"`
}

type refundArgs struct {
	ItemID string `json:"item_id"`
	Reason string `json:"reason,omitempty"`
}

type orderArgs struct {
	Product string `json:"product"`
	Price   int    `json:"price" validate:"min=0" jsonschema:"description=the price in USD"`
}

// newShop returns the agent whose actions are the seed's tools, each open
// only to the agent that uses it (help hides it from everyone else). They
// ask for no confirmation; each logs what it did.
func newShop(log *slog.Logger) *agency.Agent {
	only := func(id string) agency.ActionOption {
		return agency.AccessBySender(map[string]agency.Access{id: agency.Permitted}, agency.Denied)
	}
	shop := agency.MustNewAgent(shopID)
	agency.Handle(shop, "look_up_item", func(ctx context.Context, a searchArgs) (string, error) {
		log.Info("shop: found item", "search_query", a.Query, "item_id", "item_132612938")
		return "item_132612938", nil
	}, only(refundsID), agency.Describe("Use to find item ID.\nSearch query can be a description or keywords."))
	agency.Handle(shop, "execute_refund", func(ctx context.Context, a refundArgs) (string, error) {
		if a.Reason == "" {
			a.Reason = "not provided"
		}
		log.Info("shop: refund executed", "item_id", a.ItemID, "reason", a.Reason)
		return "success", nil
	}, only(refundsID))
	agency.Handle(shop, "execute_order", func(ctx context.Context, a orderArgs) (string, error) {
		log.Info("shop: order executed", "product", a.Product, "price_usd", a.Price)
		return "Success", nil
	}, only(salesID), agency.Describe("Price should be in USD."))
	return shop
}

// newTeam makes the agents of the seed that run in this process (run
// says which) and returns them in the order they join the space.
func newTeam(team *handoff.Team, term *human.Terminal, run func(id string) bool, log *slog.Logger) ([]*agency.Agent, error) {
	var agents []*agency.Agent
	if run(shopID) {
		agents = append(agents, newShop(log))
	}
	back := handoff.OnLLM(handoff.To(triageID),
		"Call this if the user brings up a topic outside of your purview,\nincluding escalating to human.",
		handoff.Name("transfer_back_to_triage"))
	if run(salesID) {
		sales, err := team.Agent(salesID, salesPrompt, back)
		if err != nil {
			return nil, err
		}
		agents = append(agents, sales.Agent())
	}
	if run(refundsID) {
		refunds, err := team.Agent(refundsID, refundsPrompt, back)
		if err != nil {
			return nil, err
		}
		agents = append(agents, refunds.Agent())
	}
	if run(humanID) {
		manager, err := team.Human(humanID, term)
		if err != nil {
			return nil, err
		}
		agents = append(agents, manager.Agent())
	}
	if run(triageID) {
		triage, err := team.Agent(triageID, triagePrompt,
			handoff.OnLLM(handoff.To(refundsID), "Use for issues, repairs, or refunds.", handoff.Name("transfer_to_issues_and_repairs")),
			handoff.OnLLM(handoff.To(salesID), "Use for anything sales or buying related.", handoff.Name("transfer_to_sales_agent")),
			handoff.OnLLM(handoff.To(humanID), "Only call this if explicitly asked to.", handoff.Name("escalate_to_human")))
		if err != nil {
			return nil, err
		}
		agents = append(agents, triage.Agent())
	}
	return agents, nil
}
