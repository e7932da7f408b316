"""GSM8K-format items for tests: (question, answer, final number), each answer in GSM8K's exact format (worked lines
with `<<expression=value>>` calculator annotations, newline-separated, then a final `#### n` line).

Provenance: the first three are transcribed from memory of well-known public GSM8K items (the first two problems
of the train split, "Natalia sold clips..." and "Weng earns $12...", and the first of the test split, "Janet's
ducks..."); wording may differ in detail from the released files, but the format is GSM8K's. The other seven were
written for hf-jepa in the same format, to cover what the answer extraction must handle: thousands commas in the
final line ("#### 5,000"), a negative answer, decimals, dollar signs inside annotations, multi-step chains. No
other GSM8K text is stored in hf-jepa.
"""

GSM8K_FORMAT_ITEMS = (
    (
        "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many "
        "clips did Natalia sell altogether in April and May?",
        "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
        "Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n"
        "#### 72",
        "72",
    ),
    (
        "Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. How much did she "
        "earn?",
        "Weng earns 12/60 = $<<12/60=0.2>>0.2 per minute.\nWorking 50 minutes, she earned 0.2 x 50 = $<<0.2*50=10>>10.\n#### 10",
        "10",
    ),
    (
        "Janet\u2019s ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins for her "
        "friends every day with four. She sells the remainder at the farmers' market daily for $2 per fresh duck "
        "egg. How much in dollars does she make every day at the farmers' market?",
        "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\n"
        "She makes 9 * 2 = $<<9*2=18>>18 every day at the farmer\u2019s market.\n"
        "#### 18",
        "18",
    ),
    (
        "A school buys 4 laptops at $1,250 each. How much does the school spend?",
        "The school spends 4 * 1,250 = $<<4*1250=5000>>5,000.\n#### 5,000",
        "5000",
    ),
    (
        "The temperature was 5 degrees at noon and fell 12 degrees by midnight. What was the temperature at midnight?",
        "The temperature at midnight was 5 - 12 = <<5-12=-7>>-7 degrees.\n#### -7",
        "-7",
    ),
    (
        "A pen costs $1.25 and a notebook costs $2.50. How much do 3 pens and 1 notebook cost together?",
        "3 pens cost 3 * 1.25 = $<<3*1.25=3.75>>3.75.\nTogether they cost 3.75 + 2.50 = $<<3.75+2.50=6.25>>6.25.\n"
        "#### 6.25",
        "6.25",
    ),
    (
        "Tom reads 12 pages a day for 2 weeks. How many pages does he read?",
        "2 weeks is 2 * 7 = <<2*7=14>>14 days.\nTom reads 12 * 14 = <<12*14=168>>168 pages.\n#### 168",
        "168",
    ),
    (
        "A baker makes 3 dozen rolls and sells 29 of them. How many rolls are left?",
        "3 dozen is 3 * 12 = <<3*12=36>>36 rolls.\n36 - 29 = <<36-29=7>>7 rolls are left.\n#### 7",
        "7",
    ),
    (
        "Maria has 3 times as many stickers as Ben, who has 15. They share all of their stickers equally among 4 "
        "friends. How many stickers does each friend get?",
        "Maria has 3 * 15 = <<3*15=45>>45 stickers.\nTogether they have 45 + 15 = <<45+15=60>>60 stickers.\n"
        "Each friend gets 60 / 4 = <<60/4=15>>15 stickers.\n#### 15",
        "15",
    ),
    (
        "A car travels 1,200 miles on 40 gallons of gas. How many miles does it travel per gallon?",
        "It travels 1,200 / 40 = <<1200/40=30>>30 miles per gallon.\n#### 30",
        "30",
    ),
)
