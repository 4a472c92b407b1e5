"""The workplace style of `generate.py --style workplace`: two colleagues (a third joins some
threads) writing longer messages in a team chat about projects, travel, equipment, health and
money, eight threads per user of 24-34 slots. Another set of people, topics, wordings and
lengths than the friends' chat of the checked-in corpus, so that settings chosen on both are
not tuned to one style. Same fact schema as `generate.FACTS`.
"""

from __future__ import annotations

USERS = [
    ("ingrid", "Ingrid", "Omar", "Beatriz"),
    ("felix", "Felix", "Noor", "Caleb"),
    ("amara", "Amara", "Viktor", "Sunita"),
    ("dmitri", "Dmitri", "Chloe", "Tariq"),
]
SHE = {"Ingrid", "Beatriz", "Noor", "Amara", "Sunita", "Chloe"}

WHEN = [
    "at the start of the quarter", "last Thursday", "the week before last", "in January",
    "this Monday", "over the long weekend", "a month ago", "right after the offsite",
]

FACTS = [
    dict(
        slots=dict(lang=["Rust", "Go", "Kotlin", "Elixir"], service=["billing", "search", "checkout"]),
        say="Quick update from my side: we rewrote the {service} service in {lang} {when}, and "
            "the latency graphs have been flat ever since, which nobody on the team expected.",
        ask="Did the rewrite of that service you kept complaining about ever actually happen?",
        reply="It did, {when}. The {service} service runs on {lang} now and I sleep better.",
        q="Which programming language did {S}'s team use for the {service} rewrite?",
        when="When did {S}'s team finish rewriting the {service} service?",
        para="What did {S}'s group port that backend component to?",
        contrast=True,
        distract=["Someone should really write down how the deploy pipeline works, it is tribal "
                  "knowledge at this point and it keeps biting new people.",
                  "I read a long thread arguing about which language is best for services, "
                  "nobody convinced anybody."],
    ),
    dict(
        slots=dict(conf=["KubeCon in Paris", "PyCon in Pittsburgh", "a security summit in Vienna"],
                   topic=["load shedding", "zero-downtime migrations", "fuzzing parsers"]),
        say="I gave a talk on {topic} at {conf} {when}; the room was packed and the questions "
            "afterwards went on for forty minutes.",
        ask="How did the conference go? You were nervous about presenting.",
        reply="Better than I feared! {when_cap} at {conf}, talking about {topic}, full room.",
        q="What subject did {S} present at {conf}?",
        when="When did {S} speak at {conf}?",
        para="What was the theme of {S}'s session on stage abroad?",
        distract=["The conference budget for next year has not been approved yet, so hold off "
                  "on booking anything.",
                  "I watched a recorded talk on observability during lunch, it was mostly slides "
                  "of dashboards."],
    ),
    dict(
        slots=dict(device=["a standing desk", "an ultrawide monitor", "a split keyboard"],
                   reason=["my back", "my wrists", "my neck"]),
        say="Facilities finally delivered {device} {when}, because {reason} had been killing me "
            "after long days of calls.",
        ask="Did the equipment request you filed ever get approved?",
        reply="Yes, {when}! I have {device} now, {reason} already feels better.",
        q="What equipment did {S} get from facilities?",
        when="When did {S}'s new equipment arrive?",
        para="Which ergonomic upgrade landed on {S}'s workspace?",
        contrast=True,
        distract=["The printer on our floor is jammed again and the ticket has been open for a "
                  "week.",
                  "Someone took the good chair from the meeting room, if you see it please bring "
                  "it back."],
    ),
    dict(
        slots=dict(city=["Singapore", "Nairobi", "Toronto", "Melbourne"]),
        say="Big news that I can finally share: I accepted the transfer to the {city} office, "
            "the move is planned for the autumn once the visa paperwork clears.",
        ask="What did you decide about the relocation offer from management?",
        reply="I said yes. {city_cap} office, in the autumn, if the visa comes through in time.",
        q="Which office is {S} transferring to?",
        para="In what city will {S} be based after the move?",
        contrast=True,
        distract=["The relocation policy document is forty pages long and I still do not know "
                  "who pays for the movers.",
                  "Half of the sales team seems to be travelling this month."],
    ),
    dict(
        slots=dict(cert=["the AWS solutions architect exam", "the CKA exam",
                         "the CISSP certification"],
                   score=["870 out of 1000", "91 percent", "a comfortable pass"]),
        say="I passed {cert} {when} with {score}, after three months of studying on the train "
            "every morning.",
        ask="Did you ever sit that certification you were studying for?",
        reply="{when_cap}, and I passed with {score}. No more flashcards.",
        q="Which certification did {S} pass?",
        when="When did {S} sit {cert}?",
        para="What professional credential did {S} earn recently?",
        distract=["HR says the training budget resets in April, so plan courses before then.",
                  "The study group for certifications meets on Wednesdays, it is mostly people "
                  "complaining about exam fees."],
    ),
    dict(
        slots=dict(injury=["sprained my ankle", "broke my wrist", "pulled a muscle in my back"],
                   sport=["bouldering", "five-a-side football", "skiing"]),
        say="Heads up that I will be slower on the keyboard for a while: I {injury} {sport} "
            "{when} and the doctor wants me to take it easy.",
        ask="Why were you off sick, was it the flu going around?",
        reply="No, I {injury} {sport} {when}. Entirely my own fault.",
        q="How did {S} get hurt?",
        when="When did {S} get injured?",
        para="What activity left {S} with a medical problem?",
        distract=["There is a flu going around the office, half of the support team is out.",
                  "The company gym is closing for renovations next month."],
    ),
    dict(
        slots=dict(car=["an electric hatchback", "a second-hand estate car", "a cargo bike"],
                   cost=["eighteen thousand", "six thousand", "four thousand"]),
        say="I gave up on the commute by bus and bought {car} {when}; it cost about {cost} but "
            "it saves me an hour every day.",
        ask="Are you still taking two buses to get here every morning?",
        reply="Not anymore, I bought {car} {when}. Best {cost} I ever spent.",
        q="What vehicle did {S} buy for the commute?",
        when="When did {S} buy the new vehicle?",
        para="How does {S} get to the office these days?",
        contrast=True,
        distract=["Parking in the garage now needs a badge, the old tickets stopped working.",
                  "The bus company announced another fare increase for the spring."],
    ),
    dict(
        slots=dict(amount=["ten percent", "a twelve percent", "fifteen percent"],
                   title=["staff engineer", "engineering manager", "principal analyst"]),
        say="My promotion to {title} came through {when}, with {amount} more salary, which "
            "means I am buying the coffee on Friday.",
        ask="Any news from the promotion committee? You were waiting forever.",
        reply="Yes! {title_cap}, {when}, and {amount} more.",
        q="What is {S}'s new job title?",
        when="When was {S} promoted?",
        para="Which role did {S} move up into?",
        distract=["Performance reviews are due next week, do not forget the self assessment.",
                  "The committee meets once a quarter and never says when."],
    ),
    dict(
        slots=dict(lang=["Japanese", "Portuguese", "Arabic", "Dutch"],
                   teacher=["an online tutor", "an evening class", "a language exchange partner"]),
        say="In other news I started learning {lang} {when} with {teacher}, twice a week, "
            "mostly to order food without pointing.",
        ask="What are you doing on your Tuesday evenings now? You are never online.",
        reply="{lang} lessons with {teacher}, since {when}.",
        q="Which language is {S} studying?",
        when="When did {S} start the language lessons?",
        para="What foreign tongue is {S} picking up in the evenings?",
        contrast=True,
        distract=["The translation tool mangled the customer's email again.",
                  "Our documentation is only in English, some customers keep asking about that."],
    ),
    dict(
        slots=dict(baby=["a daughter", "a son", "twins"], name=["Elif", "Mateo", "Ana and Luis"]),
        say="I will be on parental leave from next week: we welcomed {baby}, {name}, {when}, "
            "and everyone is healthy and very tired.",
        ask="Is it true you are going on leave soon? What happened?",
        reply="We had {baby} {when}! {name}. I am on leave from next week.",
        q="What is the name of {S}'s baby?",
        when="When was {S}'s child born?",
        para="Who is the newest member of {S}'s family?",
        distract=["The parental leave policy changed in January, it is sixteen weeks now.",
                  "Someone brought a baby to the all-hands and it was the best part of it."],
    ),
    dict(
        slots=dict(trip=["hiking in Patagonia", "a cycling tour in Vietnam",
                         "sailing around Croatia"],
                   days=["three weeks", "ten days", "two weeks"]),
        say="I booked {days} of {trip} for the summer {when}; I am blocking my calendar now so "
            "nobody schedules a launch on top of it.",
        ask="Where are you going for the summer holiday this year?",
        reply="{trip_cap}, {days}, booked {when}.",
        q="What is {S} doing for the summer holiday?",
        when="When did {S} book the summer trip?",
        para="Where will {S} be travelling on vacation?",
        distract=["Remember that the holiday requests for August need approval by May.",
                  "The team calendar is a mess of overlapping out-of-office entries."],
    ),
    dict(
        slots=dict(bug=["a memory leak in the cache", "a race in the payment retries",
                        "a timezone bug in invoices"]),
        say="Found it: the outage {when} was {bug}, I have a fix in review and a test that "
            "reproduces it every time.",
        ask="Did anyone figure out what caused the incident?",
        reply="I did, {when}: {bug}. Fix is in review.",
        q="What caused the incident {S} investigated?",
        when="When did {S} find the cause of the outage?",
        para="What was the root of the production failure {S} tracked down?",
        distract=["The incident review template has nine sections and nobody fills in the last "
                  "four.",
                  "Pager duty this week was quiet, only one alert about disk space."],
    ),
    dict(
        slots=dict(pet=["a rescue cat", "two rabbits", "an old labrador"],
                   name=["Miso", "Salt and Pepper", "Bruno"]),
        say="If you hear meowing on my calls, that is {name}: we took in {pet} {when} and "
            "{name} has opinions about video meetings.",
        ask="Who was that making noise in the background of the standup?",
        reply="That was {name}, {pet} we took in {when}.",
        q="What is the name of {S}'s pet?",
        when="When did {S} take in the new pet?",
        para="Which animal lives with {S} at home?",
        contrast=True,
        distract=["Can we agree on no pets in the all-hands camera grid? It is distracting.",
                  "The office is pet friendly on Fridays now, apparently."],
    ),
    dict(
        slots=dict(house=["a flat near the river", "a terraced house in the suburbs",
                          "a cottage outside town"]),
        say="We signed the papers {when} and bought {house}; the renovation list is already "
            "longer than the mortgage.",
        ask="How did the house hunting go in the end?",
        reply="We bought {house}, signed {when}.",
        q="What kind of home did {S} buy?",
        when="When did {S} sign for the new home?",
        para="Where will {S} be living after the purchase?",
        distract=["Interest rates went up again, the news was full of it this morning.",
                  "Our landlord wants to paint the stairwell yellow, nobody asked for that."],
    ),
]

NOTES = [
    ("{S} is on call every third week.", "How often does {S} carry the pager?"),
    ("{S} prefers written updates over meetings.", "Should I book a call with {S} or write?"),
    ("{S} is vegetarian.", "Can I order the steak platter for {S}?"),
    ("{S}'s manager is {partner}.", "Who does {S} report to?"),
    ("{S} works from home on Mondays.", "Is {S} in the office on Mondays?"),
    ("{S} has a peanut allergy.", "Which food must {S} avoid?"),
    ("{S}'s desk is on the fourth floor.", "Where does {S} sit?"),
    ("{S} speaks fluent Spanish.", "Who can help with Spanish customers?"),
]
PARTNERS = ["Ruth", "Kenji", "Olga", "Marco"]

SMALL_TALK = [
    "Morning all, the {system} dashboard is red again, is anyone already looking at it or "
    "should I take a look?|On it, it looks like the usual flaky health check, nothing real.|"
    "Thanks, ping me if you need a second pair of eyes.",
    "Reminder that the {meeting} moved to {time} because half the team is travelling this "
    "week.|Noted, I will move my other call.",
    "Could someone review my pull request for the {system} cleanup? It is mostly deleting old "
    "code, I promise it is not scary.|I can look after lunch.|Much appreciated.",
    "The {meeting} ran over by thirty minutes again, I think we need a stricter agenda.|Agreed, "
    "or fewer slides.|Or both.",
    "Has anyone else noticed the VPN dropping every hour since the update?|Yes, IT says a fix "
    "is coming {time}.|So never, then.",
    "I am heads down on the {system} migration today, so slow replies from me.|Good luck, "
    "shout if you get stuck.",
    "Lunch at the {place} {time}?|Only if we are back before the {meeting}.|Deal.",
    "Can we push the {meeting} to next week? The numbers will not be ready.|Fine by me, I will "
    "update the invite.",
    "Does anyone know where the design doc for {system} lives now? The old link is dead.|Try "
    "the new wiki, it moved during the reorganisation.|Found it, thanks.",
    "The coffee machine on our floor has been fixed, in case anyone was wondering.|Finally, "
    "productivity is back.",
    "I am going to be out {time} for a dentist appointment, back after lunch.|No problem.",
    "The build is taking twenty minutes again, did something change in the cache settings?|"
    "Someone bumped the base image, I will look.|Thanks.",
    "Friendly reminder to fill in the {meeting} survey before Friday, it takes two minutes.|"
    "It took me ten.|It always does.",
    "Is the {place} still doing the lunch special or did that end?|It ended last month, sadly.",
    "We should celebrate the release somehow, maybe drinks at the {place} {time}?|I am in.|"
    "Me too, as long as it is not karaoke.",
    "My calendar is back-to-back today, if something is urgent just call me.|Will do.",
    "Who owns the {system} alerts now? I got paged for something I have never touched.|That "
    "moved to the platform team, I will fix the routing.",
    "Thanks everyone for the help with the {meeting} prep, it went well.|Great to hear.",
]
WORDS = dict(
    system=["payments", "search", "reporting", "identity", "inventory"],
    meeting=["sprint review", "planning session", "architecture sync", "quarterly review"],
    time=["tomorrow morning", "on Thursday", "after lunch", "next week"],
    place=["canteen", "noodle bar", "pub on the corner", "food trucks"],
)

WORKPLACE = dict(users=USERS, she=SHE, when=WHEN, facts=FACTS, notes=NOTES, partners=PARTNERS,
                 small_talk=SMALL_TALK, words=WORDS, sessions=8, turns=(24, 34))
