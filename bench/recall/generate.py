#!/usr/bin/env python3
"""Writes the memory retrieval corpus of `adk-bench recall`: bench/recall/corpus.jsonl and
bench/recall/questions.jsonl. Deterministic (fixed seed, no dependencies): running it again
writes the same bytes.

    python3 bench/recall/generate.py            # rewrites both files next to this script

The corpus: five users, each the shared memory of two named people talking (a third joins some
sessions), 12 sessions over about ten weeks, ~45 turns each. A bank of facts (below, written by
hand) is spread over each user's sessions: a fact is stated once, in one turn or across two
consecutive turns (one speaker asks, the other answers "Yes, last Tuesday!"-style); profile
notes (a second bank) are written with AddMemory. Everything else is small talk (short
exchanges built from templates) and distractor lines that share the salient words of a fact
without answering it.

Question kinds (each question lists the event ids that answer it):
  single_hop  a third-person question naming the person, in other words than the statement
  speaker     both people state the same kind of fact (each their own dog, hometown...); the
              question names one of them, whose name appears only as the turn's author
  when        asks when something happened; the turn says it ("last Saturday")
  adjacent    the fact is a question in one turn and its answer in the next; both turns answer
  paraphrase  shares (almost) no content word with the answer ("How does she take her morning
              drink?" vs "I take my coffee black")
  note        asks about an entry written with AddMemory (a profile note)

Each question names the bank item it was written from (`source`: `fact-07`, `note-03`), so
that `adk-bench recall --split` can choose settings on the even items of one seed's corpus
(`dev`) and report on the odd items of another's (`held-out`): the two halves share neither
conversations nor question wordings.
"""

from __future__ import annotations

import argparse
import json
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

SEED = 20261124
HERE = Path(__file__).resolve().parent

# (user id, main speaker A, main speaker B, occasional third speaker); pronouns per name.
USERS = [
    ("priya", "Priya", "Daniel", "Mei"),
    ("tomasz", "Tomasz", "Aisha", "Jonas"),
    ("lena", "Lena", "Marcus", "Rosa"),
    ("kofi", "Kofi", "Hannah", "Ravi"),
    ("sofia", "Sofia", "Ben", "Yuki"),
]
SHE = {"Priya", "Mei", "Aisha", "Lena", "Rosa", "Hannah", "Sofia", "Yuki"}

WHEN = [
    "last Saturday", "last Tuesday", "on Sunday morning", "two weeks ago", "yesterday",
    "on Friday night", "last weekend", "on Wednesday", "earlier this month", "last Monday",
]

# A fact: `say` is the owner's own statement (first person); `ask`/`reply` the same fact across
# two turns (the other speaker asks, the owner answers); `q` the single-hop question, `when` a
# when-question (only for facts whose statement carries a time), `para` a paraphrase question;
# `contrast`: both speakers can state it with different values (used for the speaker kind);
# `distract`: lines anyone may say that share the fact's salient words but do not answer it.
# {S} is the owner's name, {they}/{their}/{them} the owner's pronouns, {O} the other speaker;
# any other {slot} takes a value from `slots`.
FACTS = [
    dict(
        slots=dict(breed=["beagle", "greyhound", "border collie", "corgi", "dachshund"],
                   pet=["Biscuit", "Pepper", "Otis", "Mochi", "Juniper"]),
        say="We finally adopted a {breed} {when}, {pet}, and {pet} has already chewed through a shoe.",
        ask="So did you end up going to the shelter in the end?",
        reply="Yes, {when}! We came home with a {breed}. We named him {pet}.",
        q="What kind of dog did {S} adopt?",
        when="When did {S} bring the new dog home?",
        para="Which breed is the puppy living with {S} now?",
        contrast=True,
        distract=["My neighbour's dog barked at the mail van for an hour again.",
                  "Did you see that dog show on TV? The winner looked like a mop.",
                  "I'm not ready to adopt anything, I can barely keep a cactus alive."],
    ),
    dict(
        slots=dict(drink=["black, no sugar", "with oat milk and a little honey",
                          "as a double espresso, nothing else"]),
        say="Honestly I take my coffee {drink}, anything else tastes like dessert to me.",
        ask="How do you even drink that stuff you get at the station cafe?",
        reply="{drink_cap}. Every single day before work.",
        q="How does {S} like {their} coffee?",
        para="How does {S} take {their} morning drink?",
        contrast=True,
        distract=["The coffee machine on the third floor is broken again.",
                  "I switched to green tea for a week and got nothing done."],
    ),
    dict(
        slots=dict(race=["half marathon", "10k trail race", "marathon"],
                   time=["two hours and four minutes", "fifty-eight minutes", "four hours flat"]),
        say="I ran the {race} {when}! Finished in {time}, my legs are still complaining.",
        ask="Wait, wasn't the race this month? Did you actually run it?",
        reply="Yes, {when}! {time_cap}, I'm still limping.",
        q="How long did it take {S} to finish the {race}?",
        when="When did {S} run the {race}?",
        para="What was {S}'s finishing result in that running event?",
        distract=["There's a race on the bridge next month, the whole road will be closed.",
                  "I'd rather watch people run than do it myself."],
    ),
    dict(
        slots=dict(city=["Lisbon", "Kraków", "Osaka", "Montreal", "Edinburgh"]),
        say="My sister is moving to {city} for her new job, she leaves in the spring.",
        ask="Any news from your sister about the job offer abroad?",
        reply="She took it! She's moving to {city} in the spring.",
        q="Where is {S}'s sister relocating?",
        para="Which city will {S}'s sibling be living in soon?",
        contrast=True,
        distract=["My cousin keeps saying she'll move abroad and never does.",
                  "Moving is the worst, I still have boxes from two years ago."],
    ),
    dict(
        slots=dict(dish=["a mushroom risotto", "a lamb tagine", "dumplings from scratch",
                         "a huge paella"]),
        say="I cooked {dish} for the dinner party {when}, and there wasn't a grain left.",
        ask="How did the dinner party go? What did you end up making?",
        reply="{dish_cap}! Everyone had seconds.",
        q="What did {S} make for the dinner party?",
        when="When did {S} host the dinner party?",
        para="Which meal did {S} prepare for the guests?",
        contrast=True,
        distract=["I never know what to cook when people come over.",
                  "The party upstairs went on until three in the morning."],
    ),
    dict(
        slots=dict(allergen=["peanuts", "shellfish", "sesame", "kiwi"]),
        say="I can't have the satay, I'm allergic to {allergen}. I found out the hard way as a kid.",
        ask="Why did you send back the starter at the restaurant?",
        reply="It had {allergen} in it, and I react badly to them.",
        q="What food allergy does {S} have?",
        para="Which ingredient makes {S} ill?",
        distract=["The restaurant on the corner has a new menu, mostly small plates.",
                  "Spring allergies are killing me, I sneeze all morning."],
    ),
    dict(
        slots=dict(instrument=["the cello", "the saxophone", "the piano", "the drums"]),
        say="I started lessons for {instrument} {when}. My teacher is very patient with me.",
        ask="You said you wanted to learn an instrument. Did you sign up for anything?",
        reply="I did, {instrument}! First lesson was {when}.",
        q="Which instrument is {S} learning?",
        when="When did {S} start music lessons?",
        para="What does {S} practise with a tutor every week?",
        contrast=True,
        distract=["The band at the wedding was way too loud.",
                  "My niece has a recorder now, pray for me."],
    ),
    dict(
        slots=dict(job=["a data analyst at a logistics company", "a pharmacist at the hospital",
                        "a product designer at a small studio", "a high school chemistry teacher"]),
        say="I accepted the offer, I'm going to be {job}. I start next month.",
        ask="Did you hear back after the second interview?",
        reply="They offered it to me! I'll be {job}.",
        q="What is {S}'s new job?",
        para="What will {S} be doing for a living from next month?",
        contrast=True,
        distract=["Interviews make me so nervous, I forget my own name.",
                  "My manager wants everyone back in the office three days a week."],
    ),
    dict(
        slots=dict(place=["the Dolomites", "the Scottish Highlands", "Patagonia", "the Pyrenees"]),
        say="We booked the hiking trip for September, a whole week in {place}.",
        ask="Have you two decided where to go hiking this year?",
        reply="Yes, {place}! We booked it for September.",
        q="Where is {S} going hiking in September?",
        para="Which mountains will {S} be trekking through in autumn?",
        distract=["My hiking boots fell apart on the last trip.",
                  "September is always so busy at work."],
    ),
    dict(
        slots=dict(car=["a secondhand Skoda estate", "an electric Renault Zoe",
                        "a little red Fiat Panda"]),
        say="I bought {car} {when}. It's not glamorous, but it starts every morning.",
        ask="Did you get rid of the old car that kept breaking down?",
        reply="Finally, yes! {when_cap} I picked up {car}.",
        q="What car did {S} buy?",
        when="When did {S} get the new car?",
        para="What vehicle does {S} drive these days?",
        contrast=True,
        distract=["Parking in the city centre is impossible on a Saturday.",
                  "The car in front of me stalled at every single light."],
    ),
    dict(
        slots=dict(book=["The Remains of the Day", "Piranesi", "Middlemarch", "Project Hail Mary"]),
        say="I finished {book} on the train, I cried at the ending, don't tell anyone.",
        ask="What was that book you were reading on the train?",
        reply="{book}. I just finished it and I loved it.",
        q="Which novel did {S} finish on the train?",
        para="What was the last story {S} read from cover to cover?",
        contrast=True,
        distract=["The train was so crowded I had to stand the whole way.",
                  "I keep buying books and never reading them."],
    ),
    dict(
        slots=dict(injury=["sprained my ankle", "pulled a muscle in my back", "broke my wrist"]),
        say="I {injury} playing five-a-side {when}, so no football for a while.",
        ask="Why were you limping around the office this week?",
        reply="I {injury} at football {when}. So clumsy.",
        q="How did {S} get hurt?",
        when="When did {S} get injured playing football?",
        para="What happened to {S}'s body during the match?",
        distract=["Football on TV every night is driving me mad.",
                  "The physio across the street has a two-month waiting list."],
    ),
    dict(
        slots=dict(plant=["tomatoes", "chillies", "strawberries", "courgettes"]),
        say="The allotment is finally working, we have more {plant} than we can eat.",
        ask="How's the garden plot coming along?",
        reply="Great, so many {plant} we're giving them away.",
        q="What is {S} growing at the allotment?",
        para="Which crop is overflowing from {S}'s garden plot?",
        contrast=True,
        distract=["Slugs ate every single lettuce I planted last year.",
                  "The garden centre was packed on Sunday."],
    ),
    dict(
        slots=dict(show=["a Scandinavian crime drama", "a baking competition",
                         "a documentary about octopuses"]),
        say="I binged {show} all weekend, I regret nothing.",
        ask="What kept you up so late? You looked exhausted this morning.",
        reply="{show_cap}. I watched six episodes in a row.",
        q="What show has {S} been binge-watching?",
        para="What kept {S} glued to the screen for hours?",
        contrast=True,
        distract=["Our TV remote has vanished, I think the couch ate it.",
                  "I only watch the news when I'm cooking."],
    ),
    dict(
        slots=dict(language=["Portuguese", "Japanese", "Korean", "Greek"]),
        say="I signed up for evening classes in {language}, Tuesdays and Thursdays.",
        ask="What are those flashcards on your desk for?",
        reply="My {language} course. I have a vocabulary quiz on Thursday.",
        q="Which language is {S} studying?",
        para="What does {S} go to night school to learn to speak?",
        contrast=True,
        distract=["Evening classes at the community centre got cancelled.",
                  "My phone keeps autocorrecting everything into Spanish."],
    ),
    dict(
        slots=dict(hometown=["a fishing village in Cornwall", "a suburb of Nairobi",
                             "a small town outside Gdańsk", "the north side of Chicago"]),
        say="I grew up in {hometown}, so the sea air always feels like home.",
        ask="Where's home for you originally?",
        reply="{hometown_cap}. I go back every Christmas.",
        q="Where did {S} grow up?",
        para="What place did {S} spend {their} childhood in?",
        contrast=True,
        distract=["The town where my parents retired has one bakery and one pub.",
                  "I've never lived anywhere near the sea."],
    ),
    dict(
        slots=dict(amount=["eleven", "twenty", "fifteen"]),
        say="I gave up sugar {when} and I've already lost {amount} pounds.",
        ask="You look great, what changed?",
        reply="No sugar since {when}. {amount_cap} pounds down.",
        q="How much weight has {S} lost?",
        when="When did {S} give up sugar?",
        para="How many pounds lighter is {S} after changing {their} diet?",
        distract=["The bakery on the corner makes the best cinnamon buns.",
                  "I weighed my suitcase three times before the flight."],
    ),
    dict(
        slots=dict(anniversary=["a cabin in the woods", "a tiny hotel in Venice",
                                "a cooking class in Bologna"]),
        say="For our anniversary we're doing {anniversary}. Don't tell anyone, it's a surprise.",
        ask="What are you planning for the anniversary?",
        reply="{anniversary_cap}. It's a surprise, so keep quiet!",
        q="What is {S} planning for the anniversary?",
        para="How will {S} celebrate the years together with {their} partner?",
        distract=["My parents forgot their own anniversary last year.",
                  "Surprise parties make me anxious."],
    ),
    dict(
        slots=dict(fear=["heights", "deep water", "spiders", "flying"]),
        say="I'm terrified of {fear}, I'm not even joking, my hands go sweaty.",
        ask="Why did you skip the boat trip and the climbing wall?",
        reply="Because of my fear of {fear}. I just can't.",
        q="What is {S} afraid of?",
        para="What gives {S} sweaty palms and panic?",
        contrast=True,
        distract=["The climbing wall at the gym has a new route.",
                  "I'm terrified of my tax return, does that count?"],
    ),
    dict(
        slots=dict(score=["92", "87", "95"], exam=["bar exam", "driving theory test",
                                                   "statistics final"]),
        say="Results came in {when}: I got {score} on the {exam}!",
        ask="Did they post the results of your test yet?",
        reply="Yes, {when}! {score} on the {exam}.",
        q="What score did {S} get on the {exam}?",
        when="When did {S} get {their} {exam} results?",
        para="How well did {S} do on that assessment, in points?",
        distract=["I failed my first driving test because of a roundabout.",
                  "Results of the election come out tonight."],
    ),
    dict(
        slots=dict(baby=["a girl, Ada", "a boy, Felix", "twins, Noor and Sami"]),
        say="My brother and his wife had {baby}, {when}! I still can't quite believe it.",
        ask="Any news from the hospital?",
        reply="{baby_cap}, born {when}. Everyone's healthy.",
        q="What baby did {S}'s brother have?",
        when="When was {S}'s brother's baby born?",
        para="Who is the newest member of {S}'s family?",
        distract=["The hospital car park costs a fortune.",
                  "Babies on planes never bother me, honestly."],
    ),
    dict(
        slots=dict(game=["chess", "padel", "bouldering", "table tennis"]),
        say="I've been playing {game} every Thursday after work, I'm obsessed.",
        ask="What do you do on Thursday evenings now? You're never free.",
        reply="{game_cap}, with a group from work. I'm hooked.",
        q="What does {S} play on Thursdays?",
        para="Which pastime fills {S}'s weekly evening after the office?",
        contrast=True,
        distract=["Thursday is recycling day, don't forget the bins.",
                  "My team lost the pub quiz again."],
    ),
    dict(
        slots=dict(flat=["a two-bedroom flat near the park", "a tiny studio above a bakery",
                         "a terraced house with a garden"]),
        say="We signed the lease {when} for {flat}. Moving day is the first of the month.",
        ask="Did the landlord ever get back to you about the place you viewed?",
        reply="Yes, {when}! We got {flat}.",
        q="What new home did {S} rent?",
        when="When did {S} sign the lease?",
        para="Where will {S} be living after moving day?",
        distract=["Our landlord still hasn't fixed the boiler.",
                  "Rents in this city are out of control."],
    ),
    dict(
        slots=dict(volunteer=["at the food bank", "at an animal shelter", "teaching adults to read"]),
        say="I volunteer {volunteer} on Saturday mornings now. It's the best part of my week.",
        ask="Where do you disappear to on Saturday mornings?",
        reply="I volunteer {volunteer}. I really love it.",
        q="Where does {S} volunteer?",
        para="How does {S} give back to the community at the weekend?",
        distract=["Saturday mornings are for sleeping in, that's the law.",
                  "The shelter on Mill Road is asking for blankets."],
    ),
    dict(
        slots=dict(color=["sage green", "navy blue", "terracotta", "mustard yellow"]),
        say="We painted the living room {color} {when}. It looks so much bigger now.",
        ask="You were going to repaint, right? Which colour won in the end?",
        reply="{color_cap}! We did it {when}.",
        q="What colour did {S} paint the living room?",
        when="When did {S} repaint the living room?",
        para="Which shade are {S}'s lounge walls now?",
        distract=["The paint shop had forty shades of white, I gave up.",
                  "Our living room is a mess of cables."],
    ),
    dict(
        slots=dict(concert=["Radiohead", "Beyoncé", "Arctic Monkeys", "Billie Eilish"]),
        say="I saw {concert} live {when}, best concert of my life.",
        ask="How was the gig? I saw your story.",
        reply="Incredible! {concert} live {when}, I'm still buzzing.",
        q="Which artist did {S} see in concert?",
        when="When did {S} go to the concert?",
        para="Whose music did {S} hear in a stadium recently?",
        contrast=True,
        distract=["Concert tickets are so expensive now.",
                  "The gig at the pub got cancelled because of the rain."],
    ),
    dict(
        slots=dict(diet=["vegetarian", "vegan", "pescatarian"]),
        say="I've been {diet} for almost a year now, I don't miss meat at all.",
        ask="You didn't touch the burgers at the barbecue. Is that a new thing?",
        reply="Not new! I've been {diet} for nearly a year.",
        q="What diet does {S} follow?",
        para="Which way of eating has {S} chosen?",
        contrast=True,
        distract=["The barbecue got rained out, we ate indoors.",
                  "The new burger place is mostly hype."],
    ),
    dict(
        slots=dict(trip=["Morocco", "Iceland", "Vietnam", "Peru"]),
        say="Just got back from two weeks in {trip}, I have a thousand photos.",
        ask="Where did you go? You've been gone for ages!",
        reply="{trip}! Two weeks, it was amazing.",
        q="Which country did {S} visit on holiday?",
        para="Where abroad did {S} spend the last fortnight?",
        contrast=True,
        distract=["Two weeks off work sounds like a dream.",
                  "My photos from the holiday are all blurry."],
    ),
    dict(
        slots=dict(surgery=["knee surgery", "a wisdom tooth removed", "laser eye surgery"]),
        say="I had {surgery} {when}, so I'm taking it easy for a bit.",
        ask="Where were you all week? Your desk was empty.",
        reply="I had {surgery} {when}. All fine, just recovering.",
        q="What medical procedure did {S} have?",
        when="When did {S} have the operation?",
        para="Why was {S} recovering at home?",
        distract=["The dentist wants to see me twice a year now.",
                  "My desk chair is killing my back."],
    ),
    dict(
        slots=dict(birthday=["the fourteenth of March", "the second of July",
                             "the thirtieth of October"]),
        say="My birthday is on {birthday}, so mark your calendar.",
        ask="When's your birthday again? I always forget.",
        reply="{birthday_cap}. You have no excuse now.",
        q="When is {S}'s birthday?",
        para="On which date does {S} turn a year older?",
        contrast=True,
        distract=["I hate birthday parties at restaurants.",
                  "Mark your calendar, the office is closed on Friday."],
    ),
    dict(
        slots=dict(course=["pottery", "woodworking", "life drawing"]),
        say="The {course} class {when} was great, I made something that almost looks usable.",
        ask="Didn't you have your first workshop at the arts centre?",
        reply="Yes, {when}! {course_cap}. I loved getting my hands dirty.",
        q="What class did {S} take at the arts centre?",
        when="When did {S} go to the first workshop?",
        para="Which craft is {S} trying {their} hand at?",
        distract=["The arts centre café has good scones.",
                  "I'm not creative at all, I can't even draw a cat."],
    ),
    dict(
        slots=dict(bike=["a steel touring bike", "a folding bike", "a cargo bike"]),
        say="I cycle to work now on {bike}, it's faster than the bus.",
        ask="How are you getting to work since the bus strike?",
        reply="On {bike}. Honestly it's quicker.",
        q="How does {S} commute to work?",
        para="What gets {S} to the office each morning?",
        contrast=True,
        distract=["The bus strike is on again next week.",
                  "Someone stole the saddle off my neighbour's bike."],
    ),
    dict(
        slots=dict(grandma=["ninety", "ninety-five", "one hundred"]),
        say="My grandmother turned {grandma} {when}, the whole family came.",
        ask="How was the big family party?",
        reply="Lovely! Grandma turned {grandma} {when}.",
        q="How old did {S}'s grandmother turn?",
        when="When was {S}'s grandmother's birthday party?",
        para="What age did the oldest member of {S}'s family reach?",
        distract=["Family parties always end in an argument about politics.",
                  "My grandfather still drives, which terrifies everyone."],
    ),
    dict(
        slots=dict(phone=["the screen", "the battery", "the charging port"]),
        say="I dropped my phone in the lake {when}, and now {phone} is dead.",
        ask="Why haven't you been answering messages?",
        reply="My phone went in the lake {when}. {phone_cap} is gone.",
        q="What broke on {S}'s phone?",
        when="When did {S}'s phone fall in the lake?",
        para="Why can't anyone reach {S} by text?",
        distract=["The lake was freezing, only two people went swimming.",
                  "My phone battery lasts about four hours now."],
    ),
    dict(
        slots=dict(tea=["jasmine", "rooibos", "Earl Grey"]),
        say="Before bed I always have a cup of {tea}, it's my little ritual.",
        ask="What's your evening wind-down routine?",
        reply="A cup of {tea} and a book. Every night.",
        q="What tea does {S} drink before bed?",
        para="Which hot beverage helps {S} fall asleep?",
        contrast=True,
        distract=["I can't sleep if I have caffeine after four.",
                  "The tea shop on High Street closed down."],
    ),
    dict(
        slots=dict(team=["Arsenal", "Celtic", "Borussia Dortmund", "the Chicago Cubs"]),
        say="I've supported {team} since I was six, through all the bad seasons.",
        ask="Who do you support? I see you checking scores every five minutes.",
        reply="{team}, always. Since I was six.",
        q="Which team does {S} support?",
        para="Whose matches make {S} nervous every weekend?",
        contrast=True,
        distract=["The match went to penalties, I couldn't watch.",
                  "My brother supports whoever is winning."],
    ),
]

# AddMemory notes: one sentence about a person, with questions (kind `note`).
NOTES = [
    ("{S} prefers an aisle seat on flights.", "Which seat does {S} like on a plane?"),
    ("{S}'s shoe size is 42.", "What size shoes does {S} wear?"),
    ("{S} is allergic to cats.", "Which animal gives {S} an allergic reaction?"),
    ("{S}'s favourite flowers are peonies.", "What flowers should I buy for {S}?"),
    ("{S} does not drink alcohol.", "Should I bring wine for {S}?"),
    ("{S}'s partner is called {partner}.", "What is the name of {S}'s partner?"),
    ("{S} works night shifts on Fridays.", "Is {S} free on Friday nights?"),
    ("{S} is saving for a deposit on a flat.", "What is {S} putting money aside for?"),
    ("{S}'s dentist appointment is on the 9th.", "When does {S} see the dentist?"),
    ("{S} is left-handed.", "Which hand does {S} write with?"),
]
PARTNERS = ["Sam", "Alex", "Jordan", "Robin", "Charlie"]

# Small talk: short exchanges (lines separated by "|", alternating speakers), templates filled
# from the word lists; nothing in them answers a question.
SMALL_TALK = [
    "Morning! Did you sleep at all?|Not really, the neighbours had a party.|Ugh, I'm sorry.",
    "Anyway, how was your day?|Long. Very long. Meetings all afternoon.|I need a holiday.|Don't we all.",
    "Did you eat yet?|Just a sandwich at my desk.|That's sad. Eat something real tonight.",
    "The weather is {weather} again.|It's supposed to be {weather} all week.|Great. Just great.",
    "I'm so tired today.|Me too, I had three coffees and I'm still yawning.",
    "Are we still on for {day}?|Yes, {day} works.|Perfect, see you at the usual place.",
    "Can we do {day} instead?|Sure, {day} is fine.",
    "I'll be a bit late, the {transport} is delayed.|No rush.|On my way now!|Just arrived.",
    "I'm thinking of getting {food} tonight.|Ooh, get me some too.",
    "Have you tried the new {food} place by the station?|Not yet, is it good?|It's fine, a bit overpriced.",
    "My {relative} called, she says hi.|Tell her I said hi back!",
    "My {relative} is visiting next {day}.|Are you ready?|Not even slightly. The spare room is a mess.",
    "The {thing} broke again, I'm going to scream.|Have you tried turning it off and on?|Very funny.",
    "I spent the whole evening {chore}.|Riveting.|Someone has to do it.",
    "What are you up to this weekend?|Nothing much, maybe {chore}.|I might just stay in and do nothing.|That sounds perfect actually.",
    "Work is chaos this week, the {project} deadline moved up.|Of course it did.",
    "My boss asked for the {project} numbers by tomorrow.|Good luck with that.|Thanks, I'll need it.",
    "I'll tell you everything later.|Talk later!",
    "Did you see the news about the {news}?|Yeah, unbelievable.|I can't stop reading about it.",
    "I keep forgetting to reply to emails.|Same, my inbox is a disaster.",
    "Do you want to grab lunch {day}?|Only if it's not the canteen.|Deal.",
    "It's {weather} and I forgot my umbrella.|Classic.",
    "I finally cleaned the fridge.|Brave.|There was a yoghurt from last year in there.",
    "I ordered a new {thing} online.|How much was it?|Too much, don't ask.",
    "I lost my keys again this morning.|Where were they?|In the fridge. Don't ask.",
    "My {relative} sent me a meme about Mondays.|Ha, she's not wrong.",
    "I've been meaning to call you.|What's up?|Nothing serious, just wanted to catch up.|We should do this more often.",
    "The {transport} was packed this morning.|Did you get a seat?|Ha, no.",
    "I'm trying to drink more water.|How's that going?|Badly.",
    "Remind me to buy milk.|Noted.",
    "I think I'm coming down with a cold.|Drink some tea and go to bed early.|Yes, mum.",
    "Did you finish the {project} slides?|Almost, just the last chart.|Send them when you can.",
    "Sorry, I was in a meeting.|No worries.",
    "Have a good one!|You too!",
    "Guess what?|What?|I finally fixed the {thing} myself.|Look at you!",
    "Is it just me or is everyone sick right now?|Half my team is off.|Stay away from me, then.",
    "I can't decide between {food} and {food2}.|Both. Obviously.|This is why we're friends.",
    "Long day?|The longest. The {project} review went on forever.|Wine?|Tea. I'm boring now.",
    "Did you book the tickets for {day}?|Not yet, I'll do it tonight.|Don't forget this time!",
    "That's wild.|I know, right?",
    "Good for you!|Thanks, I'm pretty pleased.",
    "No way.|Yes way.|Tell me everything.",
]
WORDS = dict(
    weather=["grey", "freezing", "boiling", "windy", "rainy", "weirdly warm"],
    day=["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"],
    transport=["train", "bus", "tram", "underground"],
    food=["ramen", "pizza", "curry", "tacos", "sushi", "pho"],
    food2=["a salad", "noodles", "leftovers", "a burrito"],
    relative=["mum", "aunt", "grandma", "cousin"],
    thing=["washing machine", "printer", "laptop", "kettle", "router"],
    chore=["doing laundry", "cleaning the bathroom", "sorting out my taxes", "ironing shirts"],
    project=["quarterly", "budget", "migration", "launch"],
    news=["strike", "election", "storm", "new stadium"],
)

SESSIONS = 12
TURNS = (18, 25)  # slots: each small-talk slot is a whole exchange
KIND_ORDER = ["single_hop", "paraphrase", "when", "speaker"]

# The style above: friends' chat.
CHAT = dict(users=USERS, she=SHE, when=WHEN, facts=FACTS, notes=NOTES, partners=PARTNERS,
            small_talk=SMALL_TALK, words=WORDS, sessions=SESSIONS, turns=TURNS)


def pron(name: str, style: dict) -> dict[str, str]:
    if name in style["she"]:
        return dict(they="she", their="her", them="her")
    return dict(they="he", their="his", them="him")


def cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def fill(text: str, values: dict[str, str]) -> str:
    full = dict(values)
    full.update({f"{k}_cap": cap(v) for k, v in values.items()})
    return text.format(**full)


def small_talk(rng: random.Random, style: dict) -> list[str]:
    """One exchange: its lines, with the template slots filled."""
    values = {k: rng.choice(v) for k, v in style["words"].items()}
    return [line.format(**values) for line in rng.choice(style["small_talk"]).split("|")]


def build_user(rng: random.Random, style: dict, user: str, a: str, b: str, c: str):
    FACTS, NOTES, SESSIONS, WHEN = style["facts"], style["notes"], style["sessions"], style["when"]
    base = datetime(2026, 3, 2, 18, 0, tzinfo=timezone.utc) + timedelta(days=rng.randrange(0, 20))
    starts = []
    day = base
    for _ in range(SESSIONS):
        starts.append(day + timedelta(minutes=rng.randrange(0, 180)))
        day += timedelta(days=rng.randrange(3, 9))
    # Plan: which facts, said by whom, in which session, in which form.
    facts = rng.sample(range(len(FACTS)), min(30, len(FACTS)))
    placed = []  # (session, owner, fact index, values, form, kind)
    contrast_left = 3
    rotation = 0
    for n, fi in enumerate(facts):
        fact = FACTS[fi]
        values = {k: rng.choice(v) for k, v in fact["slots"].items()}
        values["when"] = rng.choice(WHEN)
        owner = a if n % 2 == 0 else b
        form = "pair" if n % 3 == 2 else "say"
        if form == "pair":
            kind = "adjacent"
        else:
            def fits(k: str) -> bool:
                if k == "when":
                    return "when" in fact and "{when}" in fact["say"]
                if k == "speaker":
                    return bool(fact.get("contrast")) and contrast_left > 0
                return True
            while not fits(KIND_ORDER[rotation % len(KIND_ORDER)]):
                rotation += 1
            kind = KIND_ORDER[rotation % len(KIND_ORDER)]
            rotation += 1
        if kind == "speaker":
            # The other person states the same kind of fact, with other values, elsewhere.
            contrast_left -= 1
            other = b if owner == a else a
            other_values = {k: rng.choice([x for x in v if x != values[k]])
                            for k, v in fact["slots"].items()}
            other_values["when"] = rng.choice(WHEN)
            placed.append((rng.randrange(SESSIONS), other, fi, other_values, "say", "speaker"))
        placed.append((rng.randrange(SESSIONS), owner, fi, values, form, kind))
    events_by_session: list[list[dict]] = [[] for _ in range(SESSIONS)]
    answers: list[tuple[str, list[int], int, str, dict]] = []
    # Fill each session: small talk with fact turns and distractors at random positions.
    inserts: list[list[tuple]] = [[] for _ in range(SESSIONS)]
    for p in placed:
        inserts[p[0]].append(("fact",) + p)
    for fi in facts:
        for line in FACTS[fi]["distract"]:
            inserts[rng.randrange(SESSIONS)].append(("distract", line))
    sessions = []
    for s in range(SESSIONS):
        speakers = [a, b] + ([c] if s % 4 == 1 else [])
        n_turns = rng.randrange(*style["turns"])
        slots = sorted(rng.sample(range(n_turns), min(len(inserts[s]), n_turns)))
        rng.shuffle(inserts[s])
        plan = dict(zip(slots, inserts[s]))
        t = starts[s]
        events = []
        last = None
        for i in range(n_turns):
            item = plan.get(i)
            lines = []  # (author, text, answer?)
            if item is None:
                who = rng.choice([x for x in speakers if x != last] or speakers)
                partner = rng.choice([x for x in speakers if x != who])
                for k, text in enumerate(small_talk(rng, style)):
                    lines.append((who if k % 2 == 0 else partner, text, None))
            elif item[0] == "distract":
                who = rng.choice([x for x in speakers if x != last] or speakers)
                lines.append((who, item[1], None))
            else:
                _, _, owner, fi, values, form, kind = item
                fact = FACTS[fi]
                other = b if owner == a else a
                v = dict(values, O=other, S=owner, **pron(owner, style))
                tag = (fi, owner, kind)
                if form == "pair":
                    lines.append((other, fill(fact["ask"], v), tag))
                    lines.append((owner, fill(fact["reply"], v), tag))
                else:
                    lines.append((owner, fill(fact["say"], v), tag))
            for who, text, tag in lines:
                t += timedelta(seconds=rng.randrange(20, 150))
                eid = f"{user}-s{s + 1:02d}-t{len(events) + 1:03d}"
                events.append(dict(id=eid, author=who, text=text,
                                    timestamp=t.strftime("%Y-%m-%dT%H:%M:%SZ")))
                last = who
                if tag is not None and tag[2] is not None:
                    answers.append((eid, tag))
        sessions.append(dict(user=user, session_id=f"{user}-s{s + 1:02d}", events=events))
    questions = []
    by_tag: dict[tuple, list[str]] = {}
    for eid, tag in answers:
        by_tag.setdefault(tag, []).append(eid)
    for n, ((fi, owner, kind), ids) in enumerate(by_tag.items()):
        fact = FACTS[fi]
        values = next(p[3] for p in placed if p[2] == fi and p[1] == owner)
        v = dict(values, S=owner, O=(b if owner == a else a), **pron(owner, style))
        kinds = [kind]
        # A second question on some facts, so every kind has enough questions.
        if kind not in ("paraphrase", "speaker") and n % 4 == 0:
            kinds.append("paraphrase")
        elif kind in ("single_hop", "paraphrase") and "{when}" in fact["say"] and "when" in fact:
            kinds.append("when")
        for k in kinds:
            template = {"single_hop": fact["q"], "speaker": fact["q"], "adjacent": fact["q"],
                        "when": fact.get("when"), "paraphrase": fact["para"]}[k]
            questions.append(dict(kind=k, question=fill(template, v), answers=ids,
                                  source=f"fact-{fi:02d}"))
    # AddMemory notes, written after the third session.
    notes = []
    note_time = starts[2] + timedelta(hours=3)
    for n, ni in enumerate(rng.sample(range(len(NOTES)), 5)):
        about = a if n % 2 == 0 else b
        v = dict(S=about, partner=rng.choice(style["partners"]))
        text, question = NOTES[ni]
        nid = f"{user}-note-{n + 1}"
        notes.append(dict(id=nid, author="memory", text=fill(text, v),
                          timestamp=(note_time + timedelta(minutes=n)).strftime(
                              "%Y-%m-%dT%H:%M:%SZ"),
                          custom_metadata={"source": "profile", "about": about}))
        questions.append(dict(kind="note", question=fill(question, v), answers=[nid],
                              source=f"note-{ni:02d}"))
    return sessions, notes, questions


def main() -> None:
    # `--seed N --out DIR`: another corpus of the same kind, to choose settings on without
    # tuning them to the checked-in one.
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--out", type=Path, default=HERE)
    parser.add_argument("--style", choices=["chat", "workplace"], default="chat",
                        help="chat: friends' small talk (the checked-in corpus); workplace: "
                        "colleagues' longer messages about other topics (workplace.py)")
    args = parser.parse_args()
    if args.style == "workplace":
        from workplace import WORKPLACE as style
    else:
        style = CHAT
    args.out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    corpus, all_questions = [], []
    for user, a, b, c in style["users"]:
        sessions, notes, questions = build_user(rng, style, user, a, b, c)
        for s in sessions:
            corpus.append(dict(type="session", **s))
        corpus.append(dict(type="memories", user=user, memories=notes))
        for n, q in enumerate(questions):
            all_questions.append(dict(id=f"{user}-q{n + 1:02d}", user=user, **q))
    with open(args.out / "corpus.jsonl", "w", encoding="utf-8") as f:
        for record in corpus:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    with open(args.out / "questions.jsonl", "w", encoding="utf-8") as f:
        for q in all_questions:
            f.write(json.dumps(q, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
